"""Calibrate the text runs of notebooks 05 and 06: which settings learn, within the CPU budget?

Each row of the grid is a set of :class:`attnstruct.tasks.text_config.TextConfig` fields (deltas from the defaults);
every row is trained for each objective (and seed) given, one thread per run, ``--workers`` runs side by side. For
each run we print and write the final validation loss, the unigram entropy of that run's own tokenisation, the margin
between them (how far below the context-free baseline the model got), the wall time, and the median symmetry
over layers at the end and at its peak.

    python benchmarks/calibrate_text.py --grid grid.json --out build/calibration.jsonl --workers 2

``grid.json`` is a list of objects, e.g. ``[{"vocab_size": 1000, "norm": "pre", "lr": 0.001}]``; the keys
``objectives`` and ``seeds`` (lists) in a row override the command line's for that row, and ``purpose`` (a word,
default ``grid``) is carried into the table.

    python benchmarks/calibrate_text.py --table build/calibration.jsonl --docs docs

writes ``docs/calibration.csv`` and ``docs/calibration.md`` (the table of every row, with the loss targets of
:data:`attnstruct.analyses.text_runs.LOSS_MARGINS`).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def run_one(fields: dict) -> dict:
    import torch

    torch.set_num_threads(1)
    from attnstruct.tasks import text, text_config

    config = text_config.TextConfig(**fields)
    task = text.TextTask(config)
    start = time.perf_counter()
    ds = text.train(config)
    seconds = time.perf_counter() - start
    entropy = task.data.unigram_entropy()
    val = float(ds.val_loss.dropna("step").isel(step=-1))
    median_symmetry = ds.symmetry.median("layer")
    return {
        **fields,
        "val_loss": round(val, 4),
        "unigram_entropy": round(entropy, 4),
        "margin": round(entropy - val, 4),
        "seconds": round(seconds, 1),
        "final_symmetry": round(float(median_symmetry.isel(step=-1)), 4),
        "peak_symmetry": round(float(median_symmetry.max()), 4),
        "final_directionality": round(float(ds.directionality.median("layer").isel(step=-1)), 4),
    }


COLUMNS = {
    "purpose": "purpose",
    "objective": "objective",
    "init": "init",
    "vocab_size": "vocabulary",
    "d_model": "width",
    "n_layers": "layers",
    "norm": "LN",
    "lr": "peak lr",
    "warmup": "warm-up",
    "schedule": "schedule",
    "batch_size": "batch",
    "steps": "steps",
    "seed": "seed",
    "unigram_entropy": "unigram entropy",
    "val_loss": "final val loss",
    "margin": "below unigram",
    "target": "target",
    "met": "met",
    "peak_symmetry": "peak median symmetry",
    "final_symmetry": "final median symmetry",
    "final_directionality": "final median directionality",
    "seconds": "wall s",
}
INTRO = """# Calibration: which text runs learn on two CPU cores

Notebooks 05 and 06 train small Transformers on the packaged plays. Their scores only mean something if the
models learn to use context, so a run must end with a validation loss below the unigram entropy of its own
tokenisation (the loss of a model that ignores context) by `attnstruct.analyses.text_runs.LOSS_MARGINS`: 0.3 nat for the
masked-LM encoder, 1.0 nat for the next-token decoder. This table lists the settings tried, one run each, made
by `benchmarks/calibrate_text.py` (the command is in its docstring) and written from its output; unlisted
fields are `TextConfig`'s defaults at the time of the run (4 heads, sequence length 64, dropout 0, AdamW with
weight decay 0.01, clipping 1.0, warm-up 100 steps). The wall times were measured on the 2-core machine while
other jobs shared it, so they are upper bounds; the README gives the measured time of `make reproduce`.
The rows marked `schedule` are notebook 05's model with a constant and a linearly decaying learning
rate; notebook 05 reads them from `calibration.csv`. The grids and the raw rows are in
`benchmarks/calibration/`; notebook 05's quick profile is the row of batch 64, 600 steps, learning rate 0.002,
linear decay, with 5 seeds per objective. The rows marked `06-scale` are the search for notebook 06's own smaller
model, cheap enough for four initialisations and a placebo of 5 seeds each; its quick profile is the row of 2
layers, 300 steps, learning rate 0.003 and warm-up 50.

"""


def write_table(jsonl: Path, docs: Path) -> None:
    import pandas as pd

    from attnstruct.analyses import text_runs
    from attnstruct.tasks import text_config

    rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    table = pd.DataFrame(rows)
    defaults = text_config.TextConfig()
    for field in (
        "init",
        "n_layers",
        "d_model",
        "norm",
        "lr",
        "warmup",
        "schedule",
        "batch_size",
        "steps",
        "vocab_size",
    ):
        table[field] = table[field].fillna(getattr(defaults, field)) if field in table else getattr(defaults, field)
    table["purpose"] = table["purpose"].fillna("grid") if "purpose" in table else "grid"
    table["target"] = [text_runs.LOSS_MARGINS[o] for o in table["objective"]]
    table["met"] = table["margin"] >= table["target"]
    table = table[list(COLUMNS)]
    docs.mkdir(parents=True, exist_ok=True)
    table.to_csv(docs / "calibration.csv", index=False)
    shown = table.rename(columns=COLUMNS)
    shown["met"] = shown["met"].map({True: "yes", False: "no"})

    def cell(value) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    markdown = "\n".join(lines)
    (docs / "calibration.md").write_text(INTRO + markdown + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", help="JSON list of TextConfig field deltas")
    parser.add_argument("--out", help="JSON-lines file to append rows to")
    parser.add_argument("--table", type=Path, help="JSON-lines file of finished rows: write the docs table")
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="folder for calibration.csv and .md")
    parser.add_argument("--objectives", nargs="+", default=["mlm", "next-token"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.table:
        write_table(args.table, args.docs)
        return
    if not (args.grid and args.out):
        parser.error("give --grid and --out to train, or --table to write the docs table")
    jobs = []
    for row in json.loads(Path(args.grid).read_text()):
        row = dict(row)
        objectives = row.pop("objectives", args.objectives)
        seeds = row.pop("seeds", args.seeds)
        purpose = row.pop("purpose", "grid")
        jobs += [({**row, "objective": o, "seed": s}, purpose) for o in objectives for s in seeds]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(args.workers) as pool:
        for result, (_, purpose) in zip(pool.map(run_one, [fields for fields, _ in jobs]), jobs):
            result["purpose"] = purpose
            print(json.dumps(result), flush=True)
            with out.open("a") as handle:
                handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
