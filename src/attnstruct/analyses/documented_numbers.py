"""The numbers the docs state of a build, rewritten between their marker comments from the build's datasets.

``docs/paper-notes.md`` §3.6 and the README's notebook table state what notebook 10 found; the text between each
pair of markers (:data:`BLOCKS`) is what :func:`docs_numbers` and :func:`readme_clause`
render from ``results/10_attention_sinks.nc``, never typed. After a build::

    python -m attnstruct.analyses.documented_numbers build/quick/results

Bad input (no dataset, a dataset without verdicts, a file without its markers) is one line on stderr, exit status 2,
and nothing written; otherwise every file is rendered first, then each written atomically
(:func:`attnstruct.results.write_atomically`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import xarray as xr

from .. import notebooks, results
from ..report import prose
from . import nb10_attention_sinks as nb10

COMMAND = "python -m attnstruct.analyses.documented_numbers build/quick/results"
BAD_INPUT = 2


def stored_verdicts(ds: xr.Dataset) -> dict[str, dict]:
    """The ``verdicts`` attr of notebook 10's dataset (claim -> row of :func:`attnstruct.stats.verdict_table`);
    ValueError (one line) when the dataset has none."""
    try:
        verdicts = json.loads(ds.attrs.get("verdicts", "{}"))
    except json.JSONDecodeError as err:
        raise ValueError(f"its verdicts attr is not JSON ({err})") from None
    if not isinstance(verdicts, dict) or not verdicts:
        raise ValueError("it stores no verdicts (attr verdicts): run notebook 10 to the end")
    return verdicts


MACHINE_SETTINGS = ("workers", "threads_per_worker", "cache_dir")  # how a run was spread, not what it computed


def profile_of(ds: xr.Dataset, root: str | Path | None = None) -> str:
    """The parameter profile (``params/NAME.yaml``) whose settings for notebook 10 are the ones the dataset records
    (attr ``parameters``, :data:`MACHINE_SETTINGS` aside): ``quick`` (the parameters cell's defaults) before the
    others, which may leave notebook 10 as it is; ``"no"`` when none is."""
    recorded = json.loads(ds.attrs.get("parameters", "{}"))
    root = notebooks.project_root(root)
    defaults = notebooks.declared_parameters(
        notebooks.read_notebook(notebooks.resolve_notebook(root, nb10.PLAN.notebook))
    )
    names = sorted(path.stem for path in (root / "params").glob("*.yaml"))
    for name in sorted(names, key=lambda n: n != "quick"):
        expected = json.loads(
            json.dumps({**defaults, **notebooks.load_profile(root, name).get(nb10.PLAN.notebook, {})})
        )
        if all(expected.get(k) == v for k, v in recorded.items() if k not in MACHINE_SETTINGS):
            return name
    return "no"


def own_tables(ds: xr.Dataset) -> dict[str, pd.DataFrame]:
    """Each arm's :func:`own_sink_table` read back from the ``sink_*`` variables (the seeds diagnosed), arms with
    none left out."""
    out = {}
    for attention in ds.attention.values:
        table = pd.DataFrame(
            {c: ds[f"sink_{c}"].sel(attention=attention).values for c in nb10.SINK_COLUMNS if f"sink_{c}" in ds},
            index=pd.Index(ds.seed.values, name="seed"),
        ).dropna(how="all")
        if not table.empty:
            out[str(attention)] = table
    return out


@dataclass(frozen=True)
class StoredClaimFacts:
    """One claim as notebook 10's dataset stores it (attr ``verdicts``): its ``claim``, stored ``verdict``,
    ``estimate``, 95% interval (``low``, ``high``), ``p`` (``p = 0.031`` or ``p < 0.001``) and ``n`` (units)."""

    claim: str
    verdict: str
    estimate: str
    low: str
    high: str
    p: str
    n: str


def _stored_claim(claim: str, row: Mapping) -> StoredClaimFacts:
    return StoredClaimFacts(
        claim=claim,
        verdict=str(row["verdict"]),
        estimate=prose.signed(row["estimate"]),
        low=prose.signed(row["low"]),
        high=prose.signed(row["high"]),
        p=prose.p_value(row["p_value"]),
        n=prose.count(int(row["n"]), str(row["unit"])),
    )


@dataclass(frozen=True)
class DocsFacts:
    """What the docs state of notebook 10, from its dataset alone: the ``profile`` (:func:`profile_of`) and ``seeds``
    it came from; the ``primary`` claim as stored (None: not tested) and the ``secondary`` ones; each
    arm's decoders' sinks (``own``, :class:`nb10.OwnSinksFacts`) and each real model's (``real``,
    :class:`nb10.RealModelFacts`)."""

    profile: str
    seeds: str
    primary: StoredClaimFacts | None
    secondary: list[StoredClaimFacts]
    own: list[nb10.OwnSinksFacts]
    real: list[nb10.RealModelFacts]


def docs_facts(ds: xr.Dataset, root: str | Path | None = None) -> DocsFacts:
    """:class:`DocsFacts` of notebook 10's dataset ``ds`` (the project at ``root`` names the profile); the verdicts
    are the stored ones, never decided again; ValueError (one line) for a dataset without verdicts."""
    verdicts = stored_verdicts(ds)
    seeds = len(json.loads(ds.attrs.get("parameters", "{}")).get("seeds", ds.seed.values))
    return DocsFacts(
        profile=profile_of(ds, root),
        seeds=prose.count(seeds, "seed"),
        primary=_stored_claim(nb10.PRIMARY, verdicts[nb10.PRIMARY]) if nb10.PRIMARY in verdicts else None,
        secondary=[_stored_claim(claim, row) for claim, row in verdicts.items() if claim != nb10.PRIMARY],
        own=[nb10.own_sinks(table, attention) for attention, table in own_tables(ds).items()],
        real=nb10.real_models(nb10.real_table_of(ds)),
    )


def docs_numbers(ds: xr.Dataset, root: str | Path | None = None) -> str:
    """The Markdown block ``docs/paper-notes.md`` states of notebook 10 (:func:`docs_facts` filled into its
    sentences): the primary claim's stored verdict, estimate, 95% interval, p and n; each secondary claim's verdict
    and estimate; each arm's decoders' median sink mass on position 0 against the uniform share; each real model's
    sink mass, overlap and ablation against their chance values; the profile and seeds. No commit: the numbers
    of a profile are the same at every commit that computes them alike, which is what ``make findings`` checks."""
    facts = docs_facts(ds, root)
    lines = [prose.fill("Notebook 10 at the {profile} profile ({seeds}):", facts), ""]
    lines.append(
        prose.fill(
            "- **Primary**, {claim}: **{verdict}**, {estimate} (95% interval [{low}, {high}], {p}, n = {n}).",
            facts.primary,
        )
        if facts.primary is not None
        else f"- **Primary**, {nb10.PRIMARY}: not tested in this build."
    )
    lines += [prose.fill("- Secondary, {claim}: *{verdict}*, {estimate}.", claim) for claim in facts.secondary]
    lines += [
        prose.fill(
            "- Own {attention} decoders ({diagnosed}): a median {sink_mass} of their attention on position 0 (over "
            "layers, heads and seeds) against a uniform share of {uniform}.",
            own,
        )
        for own in facts.own
    ]
    lines += [
        prose.fill(
            "- {model} ({role}): sink mass {sink_mass} against {uniform} uniform; dominant columns among the first "
            "position's channels {overlap} against {expected} by chance; zeroing them changes the sink mass by "
            "{change}, random channels by {null}.",
            model,
        )
        for model in facts.real
    ]
    return "\n".join(lines)


def readme_clause(ds: xr.Dataset) -> str:
    """The one-line "finds" clause of README's notebook table (no ``|``, no line break), from the dataset alone: the
    primary claim's stored verdict and estimate, and the real models' sink mass against the uniform share."""
    primary = stored_verdicts(ds).get(nb10.PRIMARY)
    parts = [
        "finds: the primary claim not tested"
        if primary is None
        else prose.fill(
            "finds: decoder directionality, sigmoid minus softmax, {estimate} (*{verdict}*, {p}, {n})",
            _stored_claim(nb10.PRIMARY, primary),
        )
    ]
    softmax = own_tables(ds).get(nb10.SOFTMAX)
    if softmax is not None:
        own = nb10.own_sinks(softmax, nb10.SOFTMAX)
        parts.append(f"own softmax decoders' sink mass {own.sink_mass} against {own.uniform} uniform")
    parts.extend(f"{m.model} {m.sink_mass} against {m.uniform}" for m in nb10.real_models(nb10.real_table_of(ds)))
    return "; ".join(parts)


@dataclass(frozen=True)
class Block:
    """The text of ``file`` (relative to the project root) between ``begin`` and ``end``: ``render(dataset, root)``
    of ``notebook``'s dataset, on lines of its own (``inline`` false) or inside one line (a table row)."""

    file: str
    begin: str
    end: str
    notebook: str
    render: Callable[[xr.Dataset, Path], str]
    inline: bool


BLOCKS = (
    Block(
        "docs/paper-notes.md",
        f"<!-- notebook 10 numbers: begin ({COMMAND}) -->",
        "<!-- notebook 10 numbers: end -->",
        "10_attention_sinks",
        lambda ds, root: docs_numbers(ds, root),
        inline=False,
    ),
    Block(
        "README.md",
        "<!-- notebook 10 finds: begin -->",
        "<!-- notebook 10 finds: end -->",
        "10_attention_sinks",
        lambda ds, root: readme_clause(ds),
        inline=True,
    ),
)


def replaced(text: str, block: Block, body: str) -> str:
    """``text`` with what lies between ``block``'s markers replaced by ``body``; ValueError (one line) when the
    markers are not there exactly once each, in order."""
    if text.count(block.begin) != 1 or text.count(block.end) != 1:
        raise ValueError(f"{block.file} must hold {block.begin} and {block.end} once each")
    head, rest = text.split(block.begin)
    if block.end not in rest:
        raise ValueError(f"{block.file}: {block.end} comes before {block.begin}")
    _, tail = rest.split(block.end)
    inner = body if block.inline else f"\n{body}\n"
    return f"{head}{block.begin}{inner}{block.end}{tail}"


def rendered(results_dir: str | Path, root: str | Path | None = None) -> dict[Path, str]:
    """Each file of :data:`BLOCKS` (absolute path) as it reads with its blocks rendered from the datasets in
    ``results_dir``; ValueError (one line naming the file) for a dataset missing or without verdicts, or a file
    without its markers. Nothing is written."""
    root = notebooks.project_root(root)
    datasets: dict[str, xr.Dataset] = {}
    texts: dict[Path, str] = {}
    for block in BLOCKS:
        if block.notebook not in datasets:
            path = Path(results_dir) / f"{block.notebook}.nc"
            if not path.is_file():
                raise ValueError(f"no {path}: run notebook {block.notebook} first (make reproduce)")
            try:
                datasets[block.notebook] = results.load_dataset(path)
            except Exception as err:  # noqa: BLE001  (whatever the file holds, one line)
                reason = " ".join(str(err).split())
                raise ValueError(f"{path} is not a dataset attnstruct can read ({reason})") from None
        target = root / block.file
        text = texts.get(target) or target.read_text(encoding="utf-8")
        try:
            body = block.render(datasets[block.notebook], root)
        except ValueError as err:
            raise ValueError(f"{Path(results_dir) / block.notebook}.nc: {err}") from None
        texts[target] = replaced(text, block, body)
    return texts


def stale(results_dir: str | Path, root: str | Path | None = None) -> list[str]:
    """The files of :data:`BLOCKS` whose blocks differ from what ``results_dir`` renders (``make findings``)."""
    return [str(path) for path, text in rendered(results_dir, root).items() if path.read_text(encoding="utf-8") != text]


def rewrite(results_dir: str | Path, root: str | Path | None = None) -> list[Path]:
    """Render every block (:func:`rendered`), then write each file atomically; the files written."""
    texts = rendered(results_dir, root)
    for path, text in texts.items():
        results.write_atomically(path, lambda tmp, text=text: Path(tmp).write_text(text, encoding="utf-8"))
    return list(texts)


def main(argv: list[str] | None = None) -> int:
    """``python -m attnstruct.analyses.documented_numbers RESULTS_DIR``: rewrite the blocks; exit 0, or 2 with one
    line on stderr."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(f"usage: {COMMAND.replace('build/quick/results', 'RESULTS_DIR')}", file=sys.stderr)
        return BAD_INPUT
    try:
        written = rewrite(argv[0])
    except (ValueError, results.OutputError) as err:
        print(f"documented_numbers: error: {' '.join(str(err).split())}", file=sys.stderr)
        return BAD_INPUT
    for path in written:
        print(f"rewrote the numbers in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
