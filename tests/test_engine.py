"""The training engine, task-free: records, the last step, the training-loss divisor, RNG hygiene, reuse keys."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct import cli
from attnstruct.tasks import text
from attnstruct.tasks import vision as V
from attnstruct.tasks.text_config import TextConfig
from attnstruct.tasks.vision_config import VisionConfig
from attnstruct.training import engine, resume_state, run_folder
from attnstruct.training.model import LanguageModel
from attnstruct.training.model_config import TransformerConfig

TINY = dict(
    steps=25, batch_size=8, lr=3e-3, warmup=5, log_every=10, eval_every=20, checkpoint_every=10, d_model=16,
    n_layers=2, n_heads=2, n_images=100,
)  # fmt: skip


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny(objective="masked", **changes) -> VisionConfig:
    return VisionConfig(objective=objective, source="synthetic-digits", **{**TINY, **changes})


def test_the_last_step_is_recorded_and_evaluated_when_steps_is_not_a_multiple_of_log_every():
    ds = V.train(tiny())
    assert list(ds.step.values) == [0, 10, 20, 25]
    assert np.isfinite(ds.val_loss.sel(step=[0, 20, 25])).all() and np.isnan(ds.val_loss.sel(step=10))


def test_train_loss_is_the_mean_over_the_steps_since_the_previous_record(monkeypatch):
    losses = []
    original = engine.Step.__call__

    def keep(self, batch, step):
        loss = original(self, batch, step)
        losses.append(loss)
        return loss

    monkeypatch.setattr(engine.Step, "__call__", keep)
    ds = V.train(tiny())
    expected = [float(torch.stack(losses[a:b]).sum() / (b - a)) for a, b in ((0, 10), (10, 20), (20, 25))]
    np.testing.assert_array_equal(ds.train_loss.values[1:], expected)
    assert np.isnan(ds.train_loss.values[0])


def test_building_a_model_leaves_the_global_rng_alone():
    for build in (
        lambda: text.build_model(TextConfig(d_model=32, n_heads=2, n_layers=1, seed=3), 300),
        lambda: V.build_model(tiny(seed=3)),
    ):
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        build()
        assert torch.equal(torch.rand(3), expected)


def test_training_leaves_the_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    V.train(tiny(dropout=0.1, steps=5, log_every=5, eval_every=5))
    assert torch.equal(torch.rand(3), expected)


def test_a_finished_run_is_reused_with_a_notice_and_a_stale_one_is_trained_again(tmp_path, capsys, monkeypatch):
    config = tiny(steps=10, eval_every=10)
    first = V.train(config, tmp_path)
    assert "notice" not in capsys.readouterr().out
    again = V.train(config, tmp_path)
    assert "reusing the finished run" in capsys.readouterr().out
    xr.testing.assert_identical(first, again)
    monkeypatch.setattr(run_folder, "code_digest", lambda *modules_and_root: "other code")
    retrained = V.train(config, tmp_path)
    assert "made by other attnstruct code" in capsys.readouterr().out
    assert retrained.attrs["run_key"] != first.attrs["run_key"]
    xr.testing.assert_equal(retrained, first)  # the same code path, so the same numbers
    with pytest.raises(ValueError, match=r"other parameters \(lr\)"):
        V.train(dataclasses.replace(config, lr=1e-4), tmp_path)


class Interrupt(Exception):
    pass


def test_a_checkpoint_written_by_other_code_is_set_aside(tmp_path, capsys, monkeypatch):
    config = tiny(steps=20, eval_every=20)

    def stop(step, model):
        if step == 15:
            raise Interrupt

    with pytest.raises(Interrupt):
        V.train(config, tmp_path, callback=stop)
    assert (tmp_path / run_folder.CHECKPOINT_FILE).is_file()
    steps = []
    V.train(config, tmp_path, callback=lambda step, model: steps.append(step))
    assert steps[0] == 11  # resumed after the checkpoint of step 10
    (tmp_path / run_folder.RUN_FILE).unlink()
    with pytest.raises(Interrupt):
        V.train(config, tmp_path, callback=stop)
    monkeypatch.setattr(run_folder, "code_digest", lambda *modules_and_root: "other code")
    steps.clear()
    V.train(config, tmp_path, callback=lambda step, model: steps.append(step))
    assert steps[0] == 1 and "starting the run again" in capsys.readouterr().out


def test_from_params_takes_every_field_by_name_and_refuses_missing_ones():
    params = {f: getattr(tiny(), f) for f in VisionConfig.field_names()} | {"n_seeds": 3}
    assert VisionConfig.from_params(params, seed=4) == dataclasses.replace(tiny(), seed=4)
    del params["levels"], params["clip"]
    with pytest.raises(ValueError, match="VisionConfig needs the parameters clip, levels, which are not given"):
        VisionConfig.from_params(params)
    with pytest.raises(ValueError, match="unknown vision training parameters: colour"):
        VisionConfig.from_params(params, levels=4, clip=1.0, colour="red")


def test_run_names_and_digests():
    assert TextConfig(objective="next-token", init="symmetric", seed=2).run_name() == "next-token-symmetric-seed2"
    assert tiny(seed=1).run_name() == "masked-seed1"
    assert tiny().digest() == tiny().digest() != tiny(lr=1e-4).digest()


def test_cuda_without_cuda_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="finds no CUDA device"):
        V.train(tiny(device="cuda"))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"device": "tpu"}, "device must be 'cpu', 'cuda', 'cuda:N' or 'auto'"),
        ({"amp": "yes"}, "amp must be true or false"),
        ({"seed": 1.5}, "seed must be a non-negative integer"),
        ({"warmup": -1}, "warmup"),
        ({"dropout": 1.0}, "dropout must be in"),
        ({"norm": "sandwich"}, "unknown norm 'sandwich'"),
        ({"clip": float("nan")}, "clip must be a finite number > 0"),
        ({"clip": float("inf")}, "clip must be a finite number > 0"),
        ({"weight_decay": float("inf")}, "weight_decay must be a finite number >= 0"),
        ({"steps": 10**20}, "steps must be at most 1,000,000,000"),
        ({"batch_size": 2**40}, "batch_size must be at most"),
        ({"n_layers": 99999999}, "n_layers must be at most 1,024"),
        ({"seed": 10**23}, "seed must be at most"),
    ],
)
def test_shared_fields_are_checked_once_for_every_task(changes, message):
    for make in (tiny, lambda **c: TextConfig(**c)):
        with pytest.raises(ValueError, match=message):
            make(**changes)


def copy_of_the_package(tmp_path):
    """A copy of the package's sources to edit, whose run keys :func:`run_folder.run_key` reads when
    ``run_folder.PACKAGE`` points at it."""
    import shutil

    return Path(shutil.copytree(run_folder.PACKAGE, tmp_path / "attnstruct", ignore=shutil.ignore_patterns("*.pyc")))


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def test_only_the_code_that_trains_enters_the_reuse_key(tmp_path):
    package, modules = copy_of_the_package(tmp_path), run_folder.code_modules(TextConfig())
    assert {"attnstruct.tasks.text", "attnstruct.tasks.plays_and_text_files", "attnstruct.training.engine"} <= set(
        modules
    )
    assert "attnstruct.tasks.prepared_corpus" in modules, "a module the task's modules import decides runs too"
    assert not any(m.startswith(("attnstruct.teaching", "attnstruct.analyses")) for m in modules)
    before = run_folder.code_digest(modules, package)
    edit(package / "teaching" / "lab.py", '"""', '"""A docstring edited. ')
    edit(package / "tasks" / "text.py", '"""', '"""Prose edited. ')
    edit(package / "training" / "engine.py", "\nimport ", "\n# a comment added\nimport ")
    assert run_folder.code_digest(modules, package) == before
    edit(package / "tasks" / "text.py", "def summed_loss(", "def summed_loss_renamed(")
    assert run_folder.code_digest(modules, package) != before


@pytest.mark.parametrize("config_class, task", [(TextConfig, "text"), (VisionConfig, "vision")])
def test_the_task_module_of_a_configuration_enters_its_reuse_key(tmp_path, config_class, task):
    """The configuration lives in a module without torch; the task's batches and loss, in another, decide runs."""
    package, modules = copy_of_the_package(tmp_path), run_folder.code_modules(config_class())
    assert {config_class.__module__, f"attnstruct.tasks.{task}"} <= set(modules)
    before = run_folder.code_digest(modules, package)
    edit(package / "tasks" / f"{task}.py", "def summed_loss(", "def summed_loss_changed(")
    assert run_folder.code_digest(modules, package) != before


def test_a_finished_run_survives_a_teaching_edit_and_not_a_change_of_its_loss(tmp_path, capsys, monkeypatch):
    config = tiny(steps=5, log_every=5, eval_every=5, checkpoint_every=5)
    first = V.train(config, tmp_path / "run")
    package = copy_of_the_package(tmp_path / "code")
    monkeypatch.setattr(run_folder, "PACKAGE", package)
    assert run_folder.run_key(config) == first.attrs["run_key"]
    edit(package / "teaching" / "exercises.py", '"""', '"""A docstring edited. ')
    V.train(config, tmp_path / "run")
    assert "reusing the finished run" in capsys.readouterr().out
    edit(package / "tasks" / "vision.py", "def summed_loss(", "def summed_loss_changed(")
    V.train(config, tmp_path / "run")
    assert "made by other attnstruct code" in capsys.readouterr().out


def interrupted_at_15(config, run_dir) -> None:
    def stop(step, model):
        if step == 15:
            raise Interrupt

    with pytest.raises(Interrupt):
        V.train(config, run_dir, callback=stop)


def test_the_resume_state_loads_with_the_weights_only_unpickler_and_gives_the_records_back_bit_for_bit(tmp_path):
    config = tiny(steps=20, eval_every=20)
    interrupted_at_15(config, tmp_path)
    state = torch.load(tmp_path / run_folder.CHECKPOINT_FILE, weights_only=True)
    assert state["format"] == resume_state.FORMAT and set(state) == resume_state.TOP_KEYS
    found = resume_state.read(tmp_path / run_folder.CHECKPOINT_FILE, config, V.VisionTask.EVALUATIONS)
    whole = V.train(config, tmp_path / "whole")
    assert found.step == 10 and found.records.step == [0, 10]
    assert found.records.symmetry_layer == whole.symmetry.sel(step=[0, 10]).values.tolist()


def test_a_checkpoint_that_would_run_code_is_refused_in_one_line_and_runs_none(tmp_path):
    import pickle

    touched = tmp_path / "canary"

    class Touch:
        def __reduce__(self):
            return (open, (str(touched), "w"))

    (tmp_path / run_folder.CHECKPOINT_FILE).write_bytes(pickle.dumps({"state": Touch()}))
    with pytest.raises(ValueError, match="holds objects other than tensors .* delete it to start the run over") as err:
        V.train(tiny(), tmp_path)
    assert "\n" not in str(err.value) and not touched.exists()


def test_a_checkpoint_of_the_earlier_format_is_refused_saying_to_delete_it(tmp_path):
    config = tiny()
    state = {"config": config.to_dict(), "run_key": run_folder.run_key(config), "step": 10, "records": {}}
    torch.save({**state, "model": {}, "optimizer": {}, "scheduler": {}}, tmp_path / run_folder.CHECKPOINT_FILE)
    with pytest.raises(ValueError, match="written by an earlier attnstruct.*delete it to start the run over"):
        V.train(config, tmp_path)


def test_a_checkpoint_whose_weights_do_not_fit_the_model_is_refused_and_nothing_is_loaded(tmp_path):
    config = tiny(steps=20, eval_every=20)
    interrupted_at_15(config, tmp_path)
    path = tmp_path / run_folder.CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)
    state["model"]["encoder.position.weight"] = torch.zeros(3, 3)
    torch.save(state, path)
    with pytest.raises(ValueError, match="weights of another model shape"):
        V.train(config, tmp_path)
    assert not (tmp_path / run_folder.RUN_FILE).exists()


@pytest.mark.parametrize("run_dir", ["", "   ", "FILE", "FILE/run"])
def test_a_run_folder_that_is_empty_text_or_a_file_is_refused(tmp_path, monkeypatch, run_dir):
    monkeypatch.chdir(tmp_path)  # an empty name once meant the working folder
    (tmp_path / "FILE").write_text("a file")
    with pytest.raises(ValueError, match="run_dir"):
        V.train(tiny(), run_dir.replace("FILE", str(tmp_path / "FILE")) if run_dir.strip() else run_dir)


@pytest.mark.parametrize("threads", ["0", "-1"])  # 10**8 crashes torch: tests/test_hostile_runs.py, in a process
def test_the_train_command_refuses_a_thread_count_torch_cannot_take(tmp_path, capsys, threads):
    assert cli.main(["train", "--run-dir", str(tmp_path / "run"), "--threads", threads]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--threads" in err and not (tmp_path / "run").exists()


def test_a_model_larger_than_the_memory_is_refused_before_any_weight_is_allocated(monkeypatch):
    shape = TransformerConfig(vocab_size=300, max_len=16, d_model=32, n_layers=2, n_heads=2, norm="pre")
    assert shape.n_parameters == sum(p.numel() for p in LanguageModel(shape).parameters())
    allocated = []
    monkeypatch.setattr(torch.nn.Embedding, "__init__", lambda *a, **k: allocated.append(a))
    big = TransformerConfig(vocab_size=2**20, max_len=16, d_model=2**16, n_layers=1024, n_heads=1)
    with pytest.raises(ValueError, match="training it needs .* GiB, more than the .* GiB of memory"):
        LanguageModel(big)
    assert allocated == []


def test_a_run_file_that_cannot_be_read_is_refused_in_one_line(tmp_path):
    (tmp_path / run_folder.RUN_FILE).write_bytes(b"CDF\x01 not a dataset")
    with pytest.raises(ValueError, match="run.nc is not a run attnstruct can read .* delete it") as err:
        V.train(tiny(), tmp_path)
    assert "\n" not in str(err.value)


def test_a_checkpoint_that_links_out_of_the_run_folder_is_refused(tmp_path):
    config = tiny(steps=20, eval_every=20)
    interrupted_at_15(config, tmp_path / "elsewhere")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / run_folder.CHECKPOINT_FILE).symlink_to(tmp_path / "elsewhere" / run_folder.CHECKPOINT_FILE)
    with pytest.raises(ValueError, match="checkpoint.pt' would lead out of"):
        V.train(config, tmp_path / "run")


def test_an_allocation_that_fails_while_training_is_one_line_naming_the_run_and_its_size(monkeypatch):
    def refused(self):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
            "allocate 799999999992 bytes. Error code 12 (Cannot allocate memory)"
        )

    monkeypatch.setattr(V.VisionTask, "build_model", refused)
    with pytest.raises(ValueError, match=r"^the run masked-seed0 does not fit in the memory of cpu \(it asked for "):
        V.train(tiny())
    monkeypatch.setattr(V.VisionTask, "build_model", lambda self: (_ for _ in ()).throw(RuntimeError("other")))
    with pytest.raises(RuntimeError, match="^other$"):  # any other error is not taken for a lack of memory
        V.train(tiny())
