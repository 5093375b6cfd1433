"""What the training runs of notebooks 05 and 06 cost in each profile, from the FLOPs arithmetic alone.

    .venv/bin/python benchmarks/profile_costs.py [--profiles paper gpu] [--shapes profile bert-base] [--mfu 0.1 0.3]

For each profile, shape and notebook: the runs the notebook trains (05: objectives x seeds; 06: objectives x
initialisations x seeds, plus a placebo per objective and seed; 06's baselines are 05's runs where their settings
agree, which the count does not subtract), the tokens of one run (``steps x batch_size x seq_len``), the training
FLOPs of all of them (:func:`attnstruct.tasks.step_cost.flops_per_token`, with the vocabulary of the profile's
tokenizer: 30,522 for bert-base-uncased, else the profile's BPE ``vocab_size``), at the profile's shape and at
bert-base's (``-p d_model 768 -p n_layers 12 -p n_heads 12``), and the hours on one GPU at a model-FLOPs utilisation
of each ``--mfu`` against that GPU's dense bf16 peak. The utilisation is an assumption, not a measurement:
``benchmarks/gpu_check.sh`` measures it on a GPU, and each notebook prints a projection from a step timed on its own
device before it trains. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnstruct import notebooks
from attnstruct.tasks import step_cost, text_config
from attnstruct.training import budget

ROOT = Path(__file__).resolve().parents[1]
VOCABULARIES = {"google-bert/bert-base-uncased": 30522}


SHAPES = {"profile": {}, "bert-base": {"d_model": 768, "n_layers": 12, "n_heads": 12}}


def runs_of(profile: str, notebook: str, shape: dict) -> tuple[list[text_config.TextConfig], int]:
    """The configurations of every run ``notebook`` trains under ``profile`` with ``shape``'s parameters changed,
    and the model's vocabulary."""
    declared = notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, notebook)))
    params = {**declared, **notebooks.load_profile(ROOT, profile).get(notebook, {}), **shape}
    inits = params.get("inits", ["bert"])
    configs = [
        text_config.TextConfig.from_params(params, objective=objective, init=init, seed=seed)
        for objective in params["objectives"]
        for init in inits
        for seed in params["seeds"]
    ]
    if "placebo_offset" in params:
        configs += [
            text_config.TextConfig.from_params(
                params, objective=objective, init="bert", seed=seed, init_seed=seed + params["placebo_offset"]
            )
            for objective in params["objectives"]
            for seed in params["seeds"]
        ]
    tokenizer = params.get("tokenizer", "bpe")
    return configs, VOCABULARIES.get(tokenizer, params["vocab_size"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["paper", "gpu"])
    parser.add_argument("--mfu", nargs="+", type=float, default=[0.1, 0.3])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--gpu", default="H100", help="a name of attnstruct.training.budget.PEAK_BF16_FLOPS")
    args = parser.parse_args(argv)
    peak = budget.peak_flops(args.gpu)
    if peak is None:
        raise SystemExit(f"no peak known for {args.gpu!r}; known: {', '.join(budget.PEAK_BF16_FLOPS)}")
    hours = " | ".join(f"{args.gpu} hours at {m:.0%}" for m in args.mfu)
    print(f"| profile | notebook | runs | tokens per run | shape | FLOPs in all | {hours} |")
    print("|---|---|---|---|---|---|" + "---|" * len(args.mfu))
    for profile in args.profiles:
        for shape_name, notebook in (
            (s, n) for s in args.shapes for n in ("05_training_dynamics", "06_symmetric_init")
        ):
            configs, vocab = runs_of(profile, notebook, SHAPES[shape_name])
            first = configs[0]
            tokens = first.steps * first.batch_size * first.seq_len
            flops = sum(step_cost.flops_per_token(c, vocab) * c.steps * c.batch_size * c.seq_len for c in configs)
            shape = f"{first.n_layers} x {first.d_model}, {first.n_heads} heads, vocabulary {vocab:,}"
            cells = " | ".join(f"{flops / (m * peak) / 3600:,.1f}" for m in args.mfu)
            print(f"| {profile} | {notebook[:2]} | {len(configs)} | {tokens:,} | {shape} | {flops:.2e} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
