"""``attnstruct train``: one training run from the command line, in one process or under ``torchrun``.

    attnstruct train --run-dir runs/enc --objective mlm --steps 1500 --corpus shakespeare
    attnstruct train --run-dir runs/wiki --corpus hf://datasets/ORG/NAME --corpus-config en \
        --tokenizer google-bert/bert-base-uncased --batch-size 256 --accumulate 8 --device cuda --amp true
    attnstruct train --task vision --run-dir runs/vit --objective masked
    attnstruct train --run-dir runs/enc --snapshot-every 300 --save-final   # keep weights: runs/enc/final
    attnstruct train --run-dir runs/enc                                     # resume: the rest is read back
    torchrun --standalone --nproc_per_node 4 -m attnstruct train --run-dir runs/enc --device cuda ...

Every field of the task's configuration (:class:`attnstruct.tasks.text_config.TextConfig`, the default, or
:class:`attnstruct.tasks.vision_config.VisionConfig`) is an option ``--field-name`` with the configuration's default; a
field whose default is None takes ``none`` for None. Under ``torchrun`` the process group is initialised here (NCCL
on CUDA, else gloo; also for one process, so that the launcher's run is the run of many) and each rank takes its GPU
from ``LOCAL_RANK``. Bad input: one line on stderr, exit status 2, nothing written.

A run folder that holds a run (its ``checkpoint.pt`` while it trains, its ``run.nc`` once done) gives every option
not on the command line its recorded value, so ``--run-dir`` alone resumes a run (one line says from which step)
or reuses a finished one; an option given with another value than the recorded one is refused as another run.

Weights: ``--snapshot-every N`` keeps ``run_dir/snapshots/stepNNNNNN/`` at step 0, every N steps and at the end,
``--save-final`` keeps ``run_dir/final/``; each folder holds ``config.json`` and ``model.safetensors``, the
project's own model type (``attnstruct-encoder`` or ``attnstruct-decoder``), which ``attnstruct score FOLDER``
scores and any safetensors reader (``safetensors.torch.load_file``) opens. A text run's folders open in transformers
too (``AutoModelForMaskedLM`` for an encoder, ``AutoModelForCausalLM`` for a decoder; vision runs' do not)::

    import torch, transformers
    model = transformers.AutoModelForMaskedLM.from_pretrained("runs/enc/final", trust_remote_code=True)
    logits = model(input_ids=torch.tensor([[5, 6, 7, 8]])).logits  # [1, 4, vocab_size]
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields, replace

from .errors import PROGRAM, CommandError, Parser, refuse
from .help_text import MEANINGS, described

TASKS = ("text", "vision")


def _boolean(text: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _optional_integer(text: str) -> int | None:
    """An integer, or ``none`` for a field whose default is None (``--init-seed``)."""
    return None if text.lower() == "none" else int(text)


def _threads(text: str) -> int:
    """Torch threads per process: from 1 to :func:`most_threads` (torch crashes on absurd counts)."""
    threads = int(text)
    if not 1 <= threads <= most_threads():
        raise argparse.ArgumentTypeError(f"expected 1 to {most_threads()} threads, got {text}")
    return threads


def most_threads() -> int:
    """The most torch threads a process may ask for: four per CPU of this machine (more only slow a run)."""
    return 4 * (os.cpu_count() or 1)


def _folder(text: str) -> str:
    """A folder that is there or can be made: not empty, not a file (checked again by the engine)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got an empty name")
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    return text


def _optional_string(text: str) -> str | None:
    """A string, or ``none`` for a field whose default is None (``--init-from``, ``--corpus-config``)."""
    return None if text.lower() == "none" else text


def _snapshot_every(text: str) -> int:
    every = int(text)
    if every < 0:
        raise argparse.ArgumentTypeError(f"expected 0 (no snapshots) or a positive number of steps, got {text}")
    return every


def _kind(field):
    """The option's parser: booleans and None-or-value by the field's default and annotation, else its type."""
    if isinstance(field.default, bool):
        return _boolean
    if field.default is None:
        return _optional_integer if "int" in str(field.type) else _optional_string
    return type(field.default)


def _config_class(task: str):
    """The configuration class of ``task``, from a module without torch (``train --help`` loads no more)."""
    if task == "vision":
        from ..tasks.vision_config import VisionConfig

        return VisionConfig
    from ..tasks.text_config import TextConfig

    return TextConfig


def recorded(run_dir: str) -> dict:
    """The configuration recorded in ``run_dir`` (its ``checkpoint.pt``, else its ``run.nc``), ``{}`` for a folder
    without a run; ValueError (one line) for a record that cannot be read."""
    import json

    from ..training import resume_state, run_folder

    if not os.path.isdir(run_dir):
        return {}
    checkpoint = os.path.join(run_dir, run_folder.CHECKPOINT_FILE)
    if os.path.isfile(checkpoint):
        return resume_state.recorded_config(run_folder._in_folder(run_dir, run_folder.CHECKPOINT_FILE))
    if os.path.isfile(os.path.join(run_dir, run_folder.RUN_FILE)):
        done = run_folder.read_run(run_folder._in_folder(run_dir, run_folder.RUN_FILE))
        return json.loads(done.attrs["parameters"])
    return {}


def _recorded_task(record: dict) -> str | None:
    """The task whose configuration has every field of ``record`` and its objective (None: no record)."""
    if not record:
        return None
    for task in TASKS:
        config_class = _config_class(task)
        names = {f.name for f in fields(config_class)}
        if set(record) <= names and record.get("objective") in config_class.FIXED["objective"]:
            return task
    raise CommandError(f"the run folder records a run of no task of this attnstruct ({', '.join(TASKS)})")


def option_help(config_class, field) -> str:
    """An option's meaning, its choices where the configuration fixes them (``FIXED``), and its default."""
    choices = config_class.FIXED.get(field.name)
    listed = f"; one of {', '.join(choices)}" if choices else ""
    default = (
        "none"
        if field.default is None
        else str(field.default).lower()
        if isinstance(field.default, bool)
        else field.default
    )
    return f"{MEANINGS[field.name]}{listed} (default: {default})"


def parser(task: str) -> Parser:
    """The parser of ``attnstruct train --task TASK``: the run's own options and one per configuration field."""
    return _parser(_config_class(task))


def _parser(config_class) -> Parser:
    parser = Parser(prog="attnstruct train", **described("train"))
    parser.add_argument("--task", choices=TASKS, default="text", help="what the model is trained on (default: text)")
    parser.add_argument(
        "--run-dir",
        required=True,
        type=_folder,
        help="the run's folder: checkpoint.pt, run.nc, snapshots/, final/ (a run there is resumed)",
    )
    parser.add_argument(
        "--cache-dir", type=_folder, default=None, metavar="DIR", help="attnstruct cache of corpora and tokenizers"
    )
    parser.add_argument(
        "--threads", type=_threads, default=None, metavar="N", help="torch threads per process (default: torch's own)"
    )
    parser.add_argument(
        "--snapshot-every",
        type=_snapshot_every,
        default=0,
        metavar="N",
        help="keep the weights at step 0, every N steps (a multiple of --log-every) and at the end, in "
        "run-dir/snapshots/stepNNNNNN/ (config.json + model.safetensors, scored by `attnstruct score FOLDER`); "
        "0: none",
    )
    parser.add_argument(
        "--save-final",
        action="store_true",
        help="keep the last step's weights in run-dir/final/ (config.json + model.safetensors, attnstruct's own "
        "model type: `attnstruct score` reads it, transformers' AutoModel does not)",
    )
    for f in fields(config_class):
        choices = config_class.FIXED.get(f.name)
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=_kind(f),
            default=f.default,
            choices=choices,
            metavar=f.name.upper() if choices else None,
            help=option_help(config_class, f),
        )
    return parser


def _task(task: str, config, cache):
    if task == "vision":
        from ..tasks.vision import VisionTask

        return VisionTask(config)
    from ..tasks.text import TextTask

    return TextTask(config, cache)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``attnstruct train`` and ``torchrun -m attnstruct.cli.train``; torch is imported once the options
    are parsed (``--help`` and a refused option never load it)."""
    argv = sys.argv[1:] if argv is None else argv
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1 or "TORCHELASTIC_RUN_ID" in os.environ
    rank = int(os.environ.get("RANK", "0"))
    try:
        pre = Parser(add_help=False)
        pre.add_argument("--task", choices=TASKS, default=None)
        pre.add_argument("--run-dir", type=_folder, default=None)
        known = pre.parse_known_args(argv)[0]
        record = recorded(known.run_dir) if known.run_dir is not None and not {"-h", "--help"} & set(argv) else {}
        task_name = known.task or _recorded_task(record) or "text"
        config_class = _config_class(task_name)
        parser = _parser(config_class)
        parser.set_defaults(**{name: value for name, value in record.items() if name in config_class.field_names()})
        args = parser.parse_args(argv)
        import torch

        from ..training import engine, snapshots

        if args.threads is not None:
            torch.set_num_threads(args.threads)
        config = config_class(**{f.name: getattr(args, f.name) for f in fields(config_class)})
        if distributed:
            backend = "nccl" if config.device != "cpu" and torch.cuda.is_available() else "gloo"
            torch.distributed.init_process_group(backend)
            if backend == "nccl":
                local = int(os.environ.get("LOCAL_RANK", "0"))
                torch.cuda.set_device(local)
                config = replace(config, device=f"cuda:{local}")
        ds = engine.train(
            _task(task_name, config, args.cache_dir),
            args.run_dir,
            progress=sys.stderr.isatty(),
            snapshot_every=args.snapshot_every,
            save_final=args.save_final,
            weights=snapshots.SAFETENSORS,
        )
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (CommandError, ValueError) as err:
        return refuse(PROGRAM, err)
    except OSError as err:  # a folder that cannot be made or written, a full disk
        return refuse(PROGRAM, f"{err.strerror or err}: {err.filename}" if err.filename else err)
    finally:
        torch = sys.modules.get("torch")
        if distributed and torch is not None and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    if rank == 0:
        final = ds.isel(step=-1)
        print(
            f"{config.run_name()}: {config.steps} steps, median symmetry {float(final.symmetry.median()):+.3f}, "
            f"directionality {float(final.directionality.median()):+.3f}, val loss {float(final.val_loss):.3f}"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
