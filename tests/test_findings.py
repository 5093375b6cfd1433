"""The headline findings (:mod:`attnstruct.analyses.findings`).

Tier ``findings`` (``make findings``): each finding on the quick-profile datasets that ``make reproduce`` wrote to
``$ATTNSTRUCT_FINDINGS_BUILD`` (default ``build/quick``), and the same dataset with the finding flipped (the
objectives' or the stacks' labels swapped), which must fail. It skips, with one line naming ``make reproduce``,
when a dataset is missing; ``make test`` deselects it.

The other tests run everywhere: made-up datasets shaped as the notebooks write them, with a known answer, meet
each finding, and fail it once flipped.
"""

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct.analyses import documented_numbers, findings, nb10_attention_sinks
from attnstruct.stats import verdicts as evidence
from attnstruct.stats.nulls import NullComparison

from conftest import ROOT

BUILD = Path(os.environ.get("ATTNSTRUCT_FINDINGS_BUILD", ROOT / "build" / "quick"))
BUILD = BUILD if BUILD.is_absolute() else ROOT / BUILD
SWAPS = {
    "05_training_dynamics": ("objective", {"mlm": "next-token", "next-token": "mlm"}),
    "07_vision": ("objective", {"masked": "next-patch", "next-patch": "masked", "classify-mean": "classify"}),
    "03_pretrained_models": ("stack", {"encoder": "decoder", "decoder": "encoder"}),
    "10_attention_sinks": ("attention", {"sigmoid": "softmax", "softmax": "sigmoid"}),
}
IDS = [f"{f.notebook}: {f.claim}" for f in findings.FINDINGS]


def flipped(ds: xr.Dataset, notebook: str) -> xr.Dataset:
    """``ds`` with the labels whose order the finding is about swapped (a label swapped one way only, as
    classify-mean -> classify, is swapped both ways)."""
    dim, swap = SWAPS[notebook]
    swap = {**{v: k for k, v in swap.items()}, **swap}
    return ds.assign_coords({dim: [swap.get(str(v), str(v)) for v in ds[dim].values]})


def built(finding: findings.Finding) -> xr.Dataset:
    path = finding.dataset_path(BUILD / "results")
    if not path.is_file():
        pytest.skip(f"no {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: run `make reproduce` first")
    from attnstruct import results

    return results.load_dataset(path)


# ---------------------------------------------------------------------------------------------- the quick profile


@pytest.mark.findings
@pytest.mark.parametrize("finding", findings.FINDINGS, ids=IDS)
def test_the_finding_is_met_on_the_quick_profile(finding):
    ds = built(finding)
    outcome = finding.measure(ds)
    print(f"{finding.notebook}: {outcome.line}")
    assert outcome.met, outcome.line


@pytest.mark.findings
@pytest.mark.parametrize("finding", findings.FINDINGS, ids=IDS)
def test_the_finding_fails_on_the_quick_profile_flipped(finding):
    outcome = finding.measure(flipped(built(finding), finding.notebook))
    assert not outcome.met, outcome.line


@pytest.mark.findings
def test_the_docs_state_the_numbers_the_build_renders():
    results_dir = BUILD / "results"
    if not (results_dir / "10_attention_sinks.nc").is_file():
        pytest.skip(f"no {results_dir / '10_attention_sinks.nc'}: run `make reproduce` first")
    assert documented_numbers.stale(results_dir, ROOT) == [], f"run {documented_numbers.COMMAND}"


# ---------------------------------------------------------------------------------------------- known answers


def training_runs(gap: float, n_seeds: int = 5, seed: int = 0, learned: bool = True) -> xr.Dataset:
    """Runs shaped as notebook 05 saves them: the encoder's symmetry ends ``gap`` above the decoder's; every run's
    final validation loss 2 nats below the unigram entropy (learned), or at it (not)."""
    rng = np.random.default_rng(seed)
    objectives, steps, layers = ["mlm", "next-token"], [0, 50, 100], range(4)
    shape = (2, n_seeds, len(steps), len(layers))
    symmetry = rng.normal(0.05, 0.01, shape)
    symmetry[0, :, -1] += gap
    ds = xr.Dataset(
        {
            "symmetry": (("objective", "seed", "step", "layer"), symmetry),
            "directionality": (("objective", "seed", "step", "layer"), rng.normal(-0.1, 0.01, shape)),
            "val_loss": (("objective", "seed", "step"), np.full(shape[:3], 5.0 - (2.0 if learned else 0.0))),
        },
        coords={"objective": objectives, "seed": range(n_seeds), "step": steps, "layer": list(layers)},
    )
    ds.attrs["parameters"] = json.dumps({"d_model": 64, "n_heads": 4, "n_layers": 4, "n_null_draws": 200})
    ds.attrs["unigram_entropy"] = 5.0
    return ds


def vision_runs(gap: float, n_seeds: int = 3, seed: int = 0, learned: bool = True) -> xr.Dataset:
    """Runs shaped as notebook 07 saves them: the bidirectional objectives end ``gap`` more symmetric; every run
    learned, or none (``learned``)."""
    rng = np.random.default_rng(seed)
    objectives = ["classify", "classify-mean", "masked", "next-patch"]
    steps, layers = [0, 100], range(4)
    shape = (4, n_seeds, len(steps), len(layers))
    symmetry = rng.normal(0.02, 0.01, shape)
    symmetry[1:3, :, -1] += gap
    loss = (("objective", "seed", "step"), rng.uniform(0.5, 1.0, shape[:3]))
    ds = xr.Dataset(
        {
            "symmetry": (("objective", "seed", "step", "layer"), symmetry),
            "directionality": (("objective", "seed", "step", "layer"), rng.normal(-0.1, 0.01, shape)),
            "val_loss": loss,
            "val_accuracy": loss,
            "learned": (("objective", "seed"), np.full(shape[:2], learned)),
        },
        coords={"objective": objectives, "seed": range(n_seeds), "step": steps, "layer": list(layers)},
    )
    ds.attrs["parameters"] = json.dumps({"d_model": 64, "n_heads": 4, "n_layers": 4, "n_null_draws": 200, "seed": 0})
    return ds


def pretrained_stacks(encoder: float, decoder: float) -> xr.Dataset:
    """Scores shaped as notebook 03 saves them: one encoder-only model, one decoder-only model, one with both."""
    models, stacks, layers = ["enc", "dec", "both"], ["encoder", "decoder"], range(3)
    symmetry = np.full((3, 2, 3), np.nan)
    symmetry[0, 0] = symmetry[2, 0] = encoder + np.arange(3) * 0.01
    symmetry[1, 1] = symmetry[2, 1] = decoder + np.arange(3) * 0.01
    return xr.Dataset(
        {
            "symmetry": (("model", "stack", "layer"), symmetry),
            "directionality": (("model", "stack", "layer"), np.where(np.isnan(symmetry), np.nan, -0.1)),
            "role": (("model", "stack"), [["encoder", ""], ["", "decoder"], ["encoder", "decoder"]]),
            "n_params": ("model", [1e6, 2e6, 3e6]),
        },
        coords={"model": models, "stack": stacks, "layer": list(layers)},
    )


def normalisation_arms(gap: float) -> xr.Dataset:
    """Notebook 10's arms: five seeds of softmax and sigmoid decoders (and encoders), the sigmoid decoder's final
    directionality ``gap`` above the softmax decoder's, every run below the unigram entropy by far."""
    rng = np.random.default_rng(0)
    arms = {}
    for attention in ("softmax", "sigmoid"):
        shape = (2, 5, 2, 3)
        directionality = rng.normal(-0.3, 0.01, shape)
        directionality[1, :, -1] += gap if attention == "sigmoid" else 0.0
        arms[attention] = xr.Dataset(
            {
                "symmetry": (("objective", "seed", "step", "layer"), rng.normal(0.1, 0.01, shape)),
                "directionality": (("objective", "seed", "step", "layer"), directionality),
                "val_loss": (("objective", "seed", "step"), np.full(shape[:3], 1.0)),
            },
            coords={"objective": ["mlm", "next-token"], "seed": range(5), "step": [0, 100], "layer": [0, 1, 2]},
        )
    ds = nb10_attention_sinks.combined(arms)
    ds.attrs["unigram_entropy"] = 6.0
    return ds


KNOWN = {
    "10_attention_sinks": normalisation_arms,
    "05_training_dynamics": training_runs,
    "07_vision": vision_runs,
    "03_pretrained_models": lambda gap: pretrained_stacks(0.05 + gap, 0.05),
}


@pytest.mark.parametrize("finding", findings.FINDINGS, ids=IDS)
def test_a_large_effect_meets_the_finding_and_its_flip_fails_it(finding):
    ds = KNOWN[finding.notebook](0.5)
    assert finding.measure(ds).met, finding.measure(ds).line
    outcome = finding.measure(flipped(ds, finding.notebook))
    assert not outcome.met, outcome.line


@pytest.mark.parametrize(
    "finding",
    [f for f in findings.FINDINGS if f.notebook != "03_pretrained_models"],
    ids=lambda f: f"{f.notebook}: {f.claim}",
)
def test_no_effect_does_not_meet_the_finding(finding):
    outcome = finding.measure(KNOWN[finding.notebook](0.0))
    assert not outcome.met, outcome.line


def test_five_seeds_must_hold_and_three_seeds_the_predicted_side():
    five = findings.training_symmetry_gap(training_runs(0.5))
    assert five.met and "expected: holds" in five.line and "holds:" in five.line
    three = findings.training_symmetry_gap(training_runs(0.5, n_seeds=3))
    assert three.met and "expected: the predicted side" in three.line and "cannot tell at this scale" in three.line


def effect(low, high, value, null_low=-0.1, null_high=0.1, sign=+1, n=3):
    null = NullComparison(value, 50.0, 0.0, null_low, null_high, 0.0, 400)
    return evidence.Effect(
        "claim", "seed", value, low, high, 0.95, n, 0.125, "greater" if sign > 0 else "less", null,
        "cannot tell at this scale", "", "sign-flip",
    )  # fmt: skip


@pytest.mark.parametrize(
    "low, high, value, sign, expected",
    [
        (0.2, 0.4, 0.3, +1, True),  # on the predicted side, beyond the null
        (0.05, 0.09, 0.07, +1, False),  # on the predicted side, inside the null's range
        (-0.1, 0.4, 0.3, +1, False),  # the interval includes 0
        (-0.4, -0.2, -0.3, +1, False),  # the other side
        (-0.4, -0.2, -0.3, -1, True),  # predicted negative
    ],
)
def test_holds_but_for_the_p_value_is_every_other_condition_of_the_rule(low, high, value, sign, expected):
    assert findings.holds_but_for_the_p_value(effect(low, high, value, sign=sign)) is expected


def test_a_vision_finding_on_runs_that_did_not_learn_is_not_met():
    finding = next(f for f in findings.FINDINGS if f.notebook == "07_vision")
    outcome = finding.measure(vision_runs(0.5, learned=False))
    assert not outcome.met and "the runs did not learn" in outcome.line


def test_a_training_finding_on_runs_that_did_not_learn_is_not_met():
    finding = next(f for f in findings.FINDINGS if f.notebook == "05_training_dynamics")
    outcome = finding.measure(training_runs(0.5, learned=False))
    assert not outcome.met and "the runs did not learn" in outcome.line


# ---------------------------------------------------------------------------------------------- the headline family


def brute_force_holm(p_values, alpha):
    """Holm's step-down procedure as stated: sort the p-values, reject the k-th smallest (from k = 1) while it is at
    most alpha / (m - k + 1), stop at the first that is not."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = set()
    for k, i in enumerate(order, start=1):
        if p_values[i] > alpha / (len(p_values) - k + 1):
            break
        rejected.add(i)
    return rejected


@pytest.mark.parametrize("draw", range(30))
def test_the_family_rejects_what_holms_step_down_procedure_rejects(draw):
    rng = np.random.default_rng(draw)
    p = rng.choice([1 / 32, 1 / 256, 2e-5, 0.004, 0.02, 0.3, rng.uniform(0, 0.1)], size=len(findings.HEADLINES))
    table = findings.family_table({h.notebook: v for h, v in zip(findings.HEADLINES, p)})
    for alpha in (0.01, 0.05, 0.1):
        survivors = {i for i, a in enumerate(table["adjusted"]) if a < alpha}
        assert survivors == brute_force_holm(list(p), alpha * (1 - 1e-12)), (p, alpha)


def test_five_seeds_cannot_survive_the_family_and_eight_can():
    seeds_5 = {h.notebook: (None if h.seeds is None else 5) for h in findings.HEADLINES if h.offline}
    seeds_8 = {nb: (None if n is None else 8) for nb, n in seeds_5.items()}
    at_5, at_8 = findings.family_reach(seeds_5), findings.family_reach(seeds_8)
    seed_based = [nb for nb, n in seeds_5.items() if n is not None]
    assert seed_based and all(at_5[nb] >= findings.ALPHA for nb in seed_based)  # 1/32 > 0.05/8
    assert all(at_8[nb] < findings.ALPHA for nb in seed_based)  # 1/256 < 0.05/8


def test_each_headline_is_the_primary_claim_of_its_notebooks_plan():
    from attnstruct.analyses import nb09_dynamics_at_scale, plans
    from attnstruct.checkpoints import series

    hub = nb09_dynamics_at_scale.declared_plan(pd.DataFrame(series.entries([], ["ettin"], [])))
    for h in findings.HEADLINES:
        plan = hub if h.notebook == "09_dynamics_at_scale" else plans.plan_of(h.notebook)
        assert h.claim in [c.name for c in plan.primary], h.notebook
    assert {h.notebook for h in findings.HEADLINES} == set(plans.PLANS)


def test_offline_notebook_09_adds_no_headline_and_05_is_counted_once():
    same = {"p_value": 1 / 32}
    verdicts = {
        "05_training_dynamics": {"encoder minus decoder, final median symmetry": same},
        "09_dynamics_at_scale": {"local pairs: encoder minus decoder, median symmetry": same},
    }
    p = findings.headline_p_values(verdicts)
    assert p == {"05_training_dynamics": 1 / 32}
    table = findings.family_table(p)
    assert table["p"].notna().sum() == 1 and np.isnan(table.loc["09_dynamics_at_scale", "p"])


def test_the_readme_findings_table_is_the_one_generated_from_the_design():
    readme = (ROOT / "README.md").read_text()
    assert findings.readme_table(ROOT) in readme, "regenerate it: python -m attnstruct.analyses.findings"


@pytest.mark.findings
def test_the_headline_family_on_the_quick_profile():
    verdicts = findings.build_verdicts(BUILD / "results")
    if not verdicts:
        pytest.skip("no dataset of a headline: run `make reproduce` first")
    table = findings.family_table(findings.headline_p_values(verdicts))
    print(table.to_string())
    reach = findings.family_reach({h.notebook: findings.quick_units(h, ROOT) for h in findings.HEADLINES if h.offline})
    for h in findings.HEADLINES:
        if findings.quick_units(h, ROOT) is not None:  # a seed design that cannot survive does not
            assert reach[h.notebook] < findings.ALPHA or not table.loc[h.notebook, "survives"], h.notebook
