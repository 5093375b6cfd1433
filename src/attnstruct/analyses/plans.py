"""Each notebook's pre-registered analysis: its claims, declared before any result (:class:`attnstruct.stats.Plan`).

A notebook prints its plan's table (:meth:`attnstruct.stats.Plan.table`, with :func:`seed_reach`) before its results,
and every verdict it prints passes through :meth:`attnstruct.stats.Plan.decide` of its plan, which refuses a claim the
plan does not declare.
:data:`PLANS` says where each notebook's plan is: written here as data (05's and 06's), or built by the notebook's
analysis module from the claims it tests (03: :data:`attnstruct.analyses.nb03_pretrained_models.PLAN`, 08:
:data:`attnstruct.analyses.pretrained_ordering.SWEEP_PLAN`, 04:
:data:`attnstruct.analyses.gradient_toys.PLAN`, 07: :data:`attnstruct.analyses.nb07_vision.PLAN`, 09: from
its series, :func:`attnstruct.analyses.nb09_dynamics_at_scale.declared_plan`, the local series' in
:data:`attnstruct.analyses.nb09_dynamics_at_scale.PLAN`).

With ``n`` seeds a sign-flip test cannot go below ``p = 2**-n``, and Holm over ``m`` primary claims multiplies that
by ``m``: with 5 seeds (``1/32``) only one primary claim is reachable, so each notebook declares its headline claim
primary and reports the others as secondary, uncorrected and labelled so.
"""

from __future__ import annotations

import importlib

from .. import stats

_SEED_PAIRED = "sign-flip over seeds, paired (both runs of a seed start from the same weights)"
_SWAPPED = "the two objectives' labels exchangeable within a seed (stats.paired_null)"


def _decay(objective: str) -> stats.Claim:
    return stats.Claim(
        f"{objective}: median symmetry falls after its peak",
        "seed",
        "minus Kendall's tau of the median symmetry over layers against the step, over the records after the "
        "run's peak, mean over seeds",
        "sign-flip over seeds, and beyond the null's 95% range",
        "the records after each run's peak in any order (stats.decay_null)",
        role="secondary",
    )


TRAINING_DYNAMICS = stats.Plan(
    "05_training_dynamics",
    (
        stats.Claim(
            "encoder minus decoder, final median symmetry",
            "seed",
            "median over layers of the final symmetry, encoder minus decoder of one seed, mean over seeds",
            _SEED_PAIRED,
            _SWAPPED,
        ),
        stats.Claim(
            "encoder minus decoder, final median directionality",
            "seed",
            "median over layers of the final directionality, encoder minus decoder of one seed, mean over seeds",
            _SEED_PAIRED,
            _SWAPPED,
            role="secondary",
        ),
        stats.Claim(
            "decoder final median directionality minus an untrained layer's",
            "seed",
            "median over layers of the decoder's final directionality minus an untrained layer's median, mean over "
            "seeds",
            "sign-flip over seeds, and beyond the null's 95% range",
            "the mean over as many untrained models of this shape (stats.null_of_the_mean)",
            role="secondary",
        ),
        _decay("mlm"),
        _decay("next-token"),
    ),
)

PLANS = {  # notebook -> the analysis module that holds its plan, and the plan's name there
    "03_pretrained_models": ("nb03_pretrained_models", "PLAN"),
    "04_gradient_structure": ("gradient_toys", "PLAN"),
    "05_training_dynamics": ("plans", "TRAINING_DYNAMICS"),
    "07_vision": ("nb07_vision", "PLAN"),
    "08_model_sweep": ("pretrained_ordering", "SWEEP_PLAN"),
    "09_dynamics_at_scale": ("nb09_dynamics_at_scale", "PLAN"),  # the local series; the hub's: declared_plan(entries)
}


def plan_of(notebook: str) -> stats.Plan:
    """The plan of ``notebook`` (its file name without ``.py``); ``KeyError`` naming the notebooks with one."""
    if notebook not in PLANS:
        raise KeyError(f"notebook {notebook!r} has no analysis plan; these do: {sorted(PLANS)}")
    module, name = PLANS[notebook]
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def seed_reach(plan: stats.Plan, n_seeds: int) -> dict[str, float]:
    """Claim -> the smallest p a one-sided sign-flip test of ``n_seeds`` seeds can reach, for every claim of
    ``plan``: what :meth:`attnstruct.stats.Plan.describe` and :meth:`attnstruct.stats.Plan.table` read."""
    return {claim.name: stats.smallest_p(n_seeds) for claim in plan.claims}


LOSS_CLAIM = "{objective}: final validation loss, bert minus {init}"
SPEEDUP_CLAIM = "{objective}: speed-up of {init} minus the placebo's"
PERSISTENCE_CLAIM = "{init} minus bert, final median symmetry ({objective})"
_06_OBJECTIVES, _06_INITS = ("mlm", "next-token"), ("symmetric", "symmetric-matched", "default-scale")
_SAME_BATCHES = "the runs of a seed see the same batches from different starts"

SYMMETRIC_INIT = stats.Plan(
    "06_symmetric_init",
    tuple(
        stats.Claim(
            LOSS_CLAIM.format(objective=objective, init=init),
            "seed",
            "validation loss at the last step on the fixed held-out windows, the baseline minus the initialisation of "
            "one seed, mean over seeds",
            f"sign-flip over seeds, paired ({_SAME_BATCHES})",
            "the baseline and the initialisation exchangeable within a seed; the placebo (the baseline from other "
            "weights, same batches) shows the spread of a change of start alone",
            role="primary" if (objective, init) == ("mlm", "symmetric") else "secondary",
        )
        for objective in _06_OBJECTIVES
        for init in _06_INITS
    )
    + tuple(
        stats.Claim(
            SPEEDUP_CLAIM.format(objective=objective, init=init),
            "seed",
            "1 - step / steps at which a run's smoothed validation loss first reaches its baseline's final one (never: "
            "0), the initialisation minus the placebo of one seed, mean over seeds",
            f"sign-flip over seeds, paired ({_SAME_BATCHES})",
            "the placebo: the baseline from other weights and the same batches, one disjoint pair per seed",
            role="secondary",
        )
        for objective in _06_OBJECTIVES
        for init in _06_INITS
    )
    + tuple(
        stats.Claim(
            PERSISTENCE_CLAIM.format(objective=objective, init=init),
            "seed",
            "median symmetry over layers at the end, the initialisation minus the baseline of one seed, mean over "
            "seeds",
            "sign-flip over seeds, paired",
            "none beyond the test: the two runs of a seed start from different weights",
            role="secondary",
        )
        for objective in _06_OBJECTIVES
        for init in _06_INITS
    ),
)
PLANS["06_symmetric_init"] = ("plans", "SYMMETRIC_INIT")
