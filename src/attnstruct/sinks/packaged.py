r"""The sink diagnostics of the packaged text checkpoints on one held-out passage, one row per model.

:func:`diagnose_packaged` never fetches: a model is read only where ``attnstruct fetch-models`` put it in the
cache, and every model it cannot read is named with a one-line reason (not fetched; not a text encoder or decoder;
a format transformers cannot run, ONNX or CTranslate2; no tokenizer in its folder; a checkpoint transformers could
not load; a passage too short for the windows). A model it reads is run by
:func:`~attnstruct.sinks.sink_diagnostics.diagnose` on the windows of :func:`passage_windows` and summarised in one
row (:data:`COLUMNS`, described in :func:`summary_row`).

The passage (:func:`held_out_passage`) is plain English prose written for this package, so that no checkpoint saw
it in training.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from .. import untrusted
from ..checkpoints import zoo
from .attention_passes import load_packaged
from .sink_diagnostics import SinkDiagnostics, diagnose

RUNNABLE_FORMATS = ("gguf", "safetensors-dir", "zip-of-safetensors-dir", "torch-bin-dir")
CAUSAL_BY_ROLE = {"decoder": True, "encoder": False}
HEAVY_HEAD = 0.3
COLUMNS = (
    "model",
    "role",
    "layers",
    "heads",
    "sink_positions",
    "first_token",
    "sink_mass",
    "uniform",
    "heads_above_0_3",
    "overlap_first",
    "overlap_first_expected",
    "overlap_first_p",
    "overlap_massive",
    "overlap_massive_expected",
    "ablation_change",
    "ablation_null_mean",
    "ablation_percentile",
    "layers_halved",
    "directionality",
    "directionality_without_first",
    "sink_directionality_correlation",
    "qk_norm",
    "query_bias",
    "key_bias",
    "key_bias_term",
    "seconds",
)

_PASSAGE = """\
The ferry left the north bank a little after seven, when the fog had thinned enough for the pilot to see the \
posts that marked the channel. Most mornings it carried the same people: two nurses on their way to the hospital, \
a baker with trays of bread wrapped in cloth, a few children with satchels, and an old man who never said where he \
was going but always stood at the rail and watched the water. The river was wide there, brown and slow in summer, \
fast and grey after the spring rains, and the crossing took about twenty minutes whatever the season.

On the far side the road climbed past a row of warehouses to the market square. The stalls opened early. There \
were apples and pears from the orchards up the valley, cheese from the farms on the high ground, fish that had \
come up from the coast on the night train, and a man who sold knives and scissors and would sharpen your old ones \
while you waited. By nine the square was loud with voices, and the smell of coffee drifted out of the small cafe \
on the corner, where the owner kept a chalk board of the day's prices for the benefit of anyone who cared to read it.

The town had grown around the crossing. Before the bridge was built further downstream, everything that moved \
between the two counties had to pass through here, and the inns along the waterfront still had the wide yards where \
carts once waited for the tide. Now the yards held parked cars and stacks of empty crates, and the inns served \
lunch to walkers who came for the view of the hills. The council had talked for years about closing the ferry, but \
each time the plan was announced, the town filled a hall with people who wanted to keep it, and the plan was put \
away again for another year.

In the evening the light changed. The water turned the colour of copper, the swallows came down low over the \
surface, and the last boat crossed back with its lamps already lit. The pilot, who had done the job for thirty \
years, said that he could tell the time by the birds and the height of the river better than by any clock. He kept \
a notebook in the cabin in which he wrote the level of the water every day, and the book went back further than \
anyone could remember, to a flood that had reached the steps of the church and left a line on its wall that \
visitors still asked about.

When the schools closed for the summer, the children swam from the shingle beach below the mill, and their parents \
sat on the grass with baskets of food and argued about the weather. Some years the river was so low that you could \
walk halfway across on the gravel bars; other years it rose without warning and carried whole trees past the town, \
turning slowly in the current, their roots in the air. Nobody who grew up there ever fully trusted it, and nobody \
who left ever quite forgot it.
"""


def held_out_passage() -> str:
    """One fixed English passage (about 600 words of plain prose written for this package, not drawn from any
    corpus a checkpoint was trained on).

    :func:`passage_windows` tokenises it with each model's own tokenizer, without the tokenizer's special tokens,
    and cuts the token ids into consecutive, non-overlapping windows from the start; an encoder's window is wrapped
    in its own [CLS] and [SEP], a decoder's starts with its BOS token only where its tokenizer prepends one itself.
    """
    return _PASSAGE


def _prepends_bos(tokenizer) -> bool:
    bos = getattr(tokenizer, "bos_token_id", None)
    ids = tokenizer("a").input_ids
    return bos is not None and len(ids) > 0 and ids[0] == bos


def passage_windows(tokenizer, *, causal: bool, n_sequences: int, seq_len: int) -> tuple[torch.Tensor, str]:
    """``[n_sequences, seq_len]`` token ids of :func:`held_out_passage` and the name of the sink positions.

    An encoder's windows are ``[CLS] + seq_len - 2 passage tokens + [SEP]`` (sink positions ``"[CLS]+[SEP]"``, in
    its tokenizer's own spelling); a decoder's are ``seq_len`` passage tokens, the first replaced by BOS where the
    tokenizer prepends one itself (sink position ``"0"``). ValueError (one line) when the tokenizer names no
    [CLS]/[SEP] for an encoder, or the passage is too short for the windows.
    """
    if n_sequences < 1 or seq_len < 3:
        raise ValueError(f"the windows need n_sequences >= 1 and seq_len >= 3, got {n_sequences} x {seq_len}")
    ids = tokenizer(held_out_passage(), add_special_tokens=False, verbose=False).input_ids
    if causal:
        head = [tokenizer.bos_token_id] if _prepends_bos(tokenizer) else []
        label = "0"
    else:
        cls, sep = getattr(tokenizer, "cls_token_id", None), getattr(tokenizer, "sep_token_id", None)
        if cls is None or sep is None:
            raise ValueError("its tokenizer names no [CLS] and [SEP] tokens")
        head = [cls]
        label = f"{tokenizer.cls_token}+{tokenizer.sep_token}"
    width = seq_len - len(head) - (0 if causal else 1)
    if len(ids) < n_sequences * width:
        raise ValueError(f"the passage is {len(ids)} tokens, fewer than the {n_sequences} x {width} the windows need")
    tail = [] if causal else [sep]
    windows = [head + ids[w * width : (w + 1) * width] + tail for w in range(n_sequences)]
    return torch.tensor(windows, dtype=torch.long), label


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's correlation, nan where either side is constant."""
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def summary_row(name: str, role: str, label: str, first_token: str, found: SinkDiagnostics, seconds: float) -> dict:
    """One model's row (:data:`COLUMNS`).

    ``sink_mass``: the median over all heads of every layer of the mass on the sink positions; ``heads_above_0_3``:
    the share of those heads with mass above 0.3; ``overlap_*``: the dominant key channels found among the ``k``
    first-position (massive-activation) channels, summed over layers, the count expected by chance and its drawn
    p-value; ``ablation_*``: the mean change of the per-layer sink mass when the dominant key channels are zeroed,
    the mean change with as many random channels, the percentage (0-100) of random changes at or below it, and the
    layers whose sink mass it at least halved; ``directionality`` and ``directionality_without_first``: medians over
    layers;
    ``sink_directionality_correlation``: Pearson's correlation over layers of the layer's sink mass (mean over its
    heads) with its directionality; ``key_bias_term``: the largest over layers of the median over heads;
    ``seconds``: load, tokenisation and diagnostics of this model.
    """
    layer_mass = found.mass.mean(1)
    return {
        "model": name,
        "role": role,
        "layers": found.mass.shape[0],
        "heads": found.mass.shape[1],
        "sink_positions": label,
        "first_token": first_token,
        "sink_mass": float(np.median(found.mass)),
        "uniform": found.uniform,
        "heads_above_0_3": float(np.mean(found.mass > HEAVY_HEAD)),
        "overlap_first": found.overlap_first.observed,
        "overlap_first_expected": found.overlap_first.expected,
        "overlap_first_p": found.overlap_first.p_value,
        "overlap_massive": found.overlap_massive.observed,
        "overlap_massive_expected": found.overlap_massive.expected,
        "ablation_change": found.ablation.change,
        "ablation_null_mean": found.ablation.null_mean,
        "ablation_percentile": found.ablation.percentile,
        "layers_halved": found.ablation.layers_halved,
        "directionality": float(np.median(found.directionality)),
        "directionality_without_first": float(np.median(found.directionality_without_first)),
        "sink_directionality_correlation": _correlation(layer_mass, found.directionality),
        "qk_norm": found.blind_spots.qk_norm,
        "query_bias": found.blind_spots.query_bias,
        "key_bias": found.blind_spots.key_bias,
        "key_bias_term": float(np.median(found.key_bias_term, axis=1).max()),
        "seconds": seconds,
    }


def why_not_runnable(entry: zoo.Entry, cache=None) -> str | None:
    """Why ``entry`` cannot be diagnosed without loading it (role, format, not fetched), or None."""
    if entry.role not in CAUSAL_BY_ROLE:
        article = "an" if entry.role[0] in "aeiou" else "a"
        return f"{article} {entry.role}, not a text encoder or decoder"
    if entry.format not in RUNNABLE_FORMATS:
        return f"{entry.format}: a format transformers cannot run"
    if not zoo.is_fetched(entry, cache):
        return f"{zoo.why_not_fetched(entry, cache)}; run attnstruct fetch-models {entry.name} (never fetched here)"
    return None


def diagnose_loaded(
    name: str,
    role: str,
    model: torch.nn.Module,
    tokenizer,
    *,
    n_sequences: int,
    seq_len: int,
    k: int,
    ablation_draws: int,
    seed: int,
    start: float,
) -> dict | tuple[str, str]:
    """The summary row (:func:`summary_row`) of a loaded ``model`` of ``role`` read on :func:`passage_windows` of its
    ``tokenizer``, or ``(name, one-line reason)`` when it cannot be read (no tokenizer; a passage too short);
    ``start`` is when its loading began (``time.perf_counter``), so that the row's ``seconds`` count it."""
    if tokenizer is None:
        return name, "no tokenizer in its folder (its vocabulary is its own)"
    causal = CAUSAL_BY_ROLE[role]
    try:
        ids, label = passage_windows(tokenizer, causal=causal, n_sequences=n_sequences, seq_len=seq_len)
    except ValueError as err:
        return name, str(err)
    positions = (0,) if causal else (0, seq_len - 1)
    found = diagnose(model, ids, causal=causal, positions=positions, k=k, ablation_draws=ablation_draws, seed=seed)
    first_token = tokenizer.convert_ids_to_tokens(int(ids[0, 0]))
    return summary_row(name, role, label, first_token, found, time.perf_counter() - start)


def diagnose_packaged(
    names: Sequence[str],
    *,
    cache_dir=None,
    n_sequences: int = 4,
    seq_len: int = 64,
    k: int = 10,
    ablation_draws: int = 20,
    seed: int = 0,
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The sink diagnostics of each packaged checkpoint in ``names`` that can be read from the cache, as one row
    per model (:data:`COLUMNS`, :func:`summary_row`), and ``(name, one-line reason)`` for each that cannot (module
    docstring). Nothing is fetched; an unknown name raises ValueError (:func:`attnstruct.checkpoints.zoo.resolve`).
    """
    rows, skipped = [], []
    for name in names:
        entry = zoo.resolve(name)
        reason = why_not_runnable(entry, cache_dir)
        if reason is not None:
            skipped.append((entry.name, reason))
            continue
        start = time.perf_counter()
        try:
            model, tokenizer = load_packaged(entry, cache_dir)
        except Exception as err:  # transformers raises many kinds on a checkpoint it cannot read
            skipped.append((entry.name, f"transformers could not load it ({untrusted.one_line(err)})"))
            continue
        settings = dict(n_sequences=n_sequences, seq_len=seq_len, k=k, ablation_draws=ablation_draws, seed=seed)
        row = diagnose_loaded(entry.name, entry.role, model, tokenizer, start=start, **settings)
        (skipped if isinstance(row, tuple) else rows).append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS)), skipped
