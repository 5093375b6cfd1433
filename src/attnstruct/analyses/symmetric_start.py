"""Notebook 06: what a symmetric start is at step 0, and how much of it training keeps.

``W_q^h = W_k^h`` in every head makes ``W_qk^h = W_q^h (W_k^h)^T = W_k^h (W_k^h)^T`` symmetric (positive
semi-definite) at step 0, so every head scores +1 (:func:`initial_state` measures it on the models, with the
weight scales that tell the initialisations apart). Training keeps it so only while the gradients of ``W_q`` and
``W_k`` agree; :func:`persistence_effects` tests, per treated initialisation and paired by seed, whether the final
median symmetry over layers still lies above the baseline's, gated on the runs having learned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .. import stats
from ..report import prose
from ..scores import factor_scores
from ..tasks import text, text_config
from . import gates
from .plans import PERSISTENCE_CLAIM
from .plans import SYMMETRIC_INIT as PLAN
from .symmetric_init import BASELINE
from .training_dynamics import final_median, label


def initial_state(configs: Sequence[text_config.TextConfig], vocab_size: int) -> pd.DataFrame:
    """The model of the first configuration of each initialisation in ``configs`` at step 0, one row per
    initialisation: the standard deviation of the first layer's ``W_q``, ``W_k`` and ``W_v``, the largest
    absolute bias of its Q, K and V, and the range of the symmetry of every head's ``W_qk`` (text)."""
    from ..training.model import query_key_factors

    rows, seen = [], set()
    for config in configs:
        if config.init in seen:
            continue
        seen.add(config.init)
        model = text.build_model(config, vocab_size)
        layer = model.encoder.blocks[0].attention
        symmetry = factor_scores(*query_key_factors(model)).symmetry
        linears = {"q": layer.query, "k": layer.key, "v": layer.value}
        rows.append(
            {"init": config.init}
            | {f"std W_{name}": float(linear.weight.detach().std()) for name, linear in linears.items()}
            | {
                "max |bias q,k,v|": max(float(m.bias.detach().abs().max()) for m in linears.values()),
                "head symmetry (min..max)": f"{float(symmetry.min()):+.2f} .. {float(symmetry.max()):+.2f}",
            }
        )
    return pd.DataFrame(rows).set_index("init")


def describe_scales(d_model: int) -> str:
    """The standard deviation of PyTorch's default ``U(+-1/sqrt(d))`` at width ``d_model``, against BERT's."""
    return (
        f"PyTorch's default U(±1/√d) has std 1/√(3d) = {1 / np.sqrt(3 * d_model):.4f} at d = {d_model}; BERT's is 0.02"
    )


def persistence_table(treated: xr.Dataset) -> pd.DataFrame:
    """The final median symmetry over layers, mean over seeds: one row per objective, one column per init."""
    final = final_median(treated, "symmetry").mean("seed")
    return final.transpose("objective", "init").to_pandas().rename_axis(index=None, columns=None)


def persistence_effects(
    treated: xr.Dataset, objective: str, *, targets: pd.DataFrame | None = None, seed: int = 0
) -> list[stats.Effect]:
    """Per treated initialisation: its final median symmetry over layers minus the baseline's, paired by seed
    (predicted positive: the start's symmetry persists), gated on both initialisations' runs of these seeds
    having learned (``targets``, :func:`attnstruct.analyses.gates.loss_targets`; None: all learned); secondary
    claims of the notebook's plan (:data:`attnstruct.analyses.plans.SYMMETRIC_INIT`)."""
    final = final_median(treated, "symmetry").sel(objective=objective)
    seeds = [int(s) for s in treated.seed.values]
    effects = [
        stats.paired_effect(
            final.sel(init=init).values,
            final.sel(init=BASELINE).values,
            claim=PERSISTENCE_CLAIM.format(init=init, objective=objective),
            seed=seed,
            learned=targets is None
            or gates.learned(targets, objective=objective, init=[str(init), BASELINE], seed=seeds),
        )
        for init in treated.init.values
        if init != BASELINE
    ]
    return PLAN.decide(effects) if effects else effects


def describe_persistence(treated: xr.Dataset, effects: Sequence[stats.Effect], objective: str) -> str:
    """Where each initialisation's median symmetry over layers ends (mean over seeds), each
    :func:`persistence_effects` effect with its verdict and reason, and whether the seeds can reach a verdict."""
    final = final_median(treated, "symmetry").sel(objective=objective).mean("seed")
    ends = ", ".join(f"{prose.signed(final.sel(init=init))} ({init})" for init in final.init.values)
    verdicts = " ".join(
        f"{e.claim.split(',')[0]}: {prose.signed(e.estimate)}, {e.verdict} ({e.reason})." for e in effects
    )
    reach = stats.describe_reach(treated.sizes["seed"], what="each persistence verdict")
    return (
        f"**Persistence ({label(objective)}):** after {int(treated.step[-1])} steps the median symmetry over layers "
        f"ends at {ends} (mean over seeds). {verdicts} {reach}"
    )
