"""Each notebook's pre-registered analysis: its claims, declared before any result (:class:`attnstruct.stats.Plan`).

A notebook prints its plan's table (:meth:`attnstruct.stats.Plan.table`, with :func:`seed_reach`) before its results,
and every verdict it prints passes through :meth:`attnstruct.stats.Plan.decide` of its plan, which refuses a claim the
plan does not declare.
:data:`PLANS` says where each notebook's plan is: in the notebook's analysis module (03:
:data:`attnstruct.analyses.nb03_pretrained_models.PLAN`, 08: :data:`attnstruct.analyses.nb08_model_sweep.PLAN`,
04: :data:`attnstruct.analyses.nb04_gradient_structure.PLAN`, 05:
:data:`attnstruct.analyses.nb05_training_dynamics.PLAN`, 06: :data:`attnstruct.analyses.nb06_symmetric_init.PLAN`, 07:
:data:`attnstruct.analyses.nb07_vision.PLAN`, 09: from
its series, :func:`attnstruct.analyses.nb09_dynamics_at_scale.declared_plan`, the local series' in
:data:`attnstruct.analyses.nb09_dynamics_at_scale.PLAN`).

With ``n`` seeds a sign-flip test cannot go below ``p = 2**-n``, and Holm over ``m`` primary claims multiplies that
by ``m``: with 5 seeds (``1/32``) only one primary claim is reachable, so each notebook declares its headline claim
primary and reports the others as secondary, uncorrected and labelled so.
"""

from __future__ import annotations

import importlib

from .. import stats

PLANS = {  # notebook -> the analysis module that holds its plan, and the plan's name there
    "03_pretrained_models": ("nb03_pretrained_models", "PLAN"),
    "04_gradient_structure": ("nb04_gradient_structure", "PLAN"),
    "05_training_dynamics": ("nb05_training_dynamics", "PLAN"),
    "06_symmetric_init": ("nb06_symmetric_init", "PLAN"),
    "07_vision": ("nb07_vision", "PLAN"),
    "08_model_sweep": ("nb08_model_sweep", "PLAN"),
    "09_dynamics_at_scale": ("nb09_dynamics_at_scale", "PLAN"),  # the local series; the hub's: declared_plan(entries)
    "10_attention_sinks": ("nb10_attention_sinks", "PLAN"),
}


def plan_of(notebook: str) -> stats.Plan:
    """The plan of ``notebook`` (its file name without ``.py``); ``KeyError`` naming the notebooks with one."""
    if notebook not in PLANS:
        raise KeyError(f"notebook {notebook!r} has no analysis plan; these do: {sorted(PLANS)}")
    module, name = PLANS[notebook]
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


def seed_reach(plan: stats.Plan, n_seeds: int) -> dict[str, float]:
    """Claim -> the smallest p a one-sided sign-flip test of ``n_seeds`` seeds can reach, for every claim of
    ``plan``: what :func:`attnstruct.stats.plan_reach` and :meth:`attnstruct.stats.Plan.table` read."""
    return {claim.name: stats.smallest_p(n_seeds) for claim in plan.claims}
