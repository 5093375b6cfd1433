"""The readings of text runs (notebooks 05, 06) on made-up runs: did the runs learn, can the design decide, and the
facts the notebooks state of it."""

import numpy as np
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import text_runs


def runs(final_losses: dict, inits=None) -> xr.Dataset:
    """Runs whose last validation loss is ``final_losses[objective][seed]`` (two evaluations, the first NaN)."""
    objectives = list(final_losses)
    values = np.array([[[np.nan, v] for v in final_losses[o]] for o in objectives])
    dims, coords = ("objective", "seed", "step"), {"objective": objectives, "seed": range(values.shape[1])}
    if inits is not None:
        values, dims, coords = values[:, None], ("objective", "init", "seed", "step"), coords | {"init": inits}
    return xr.Dataset({"val_loss": (dims, values)}, coords=coords | {"step": [0, 10]})


def test_a_run_learned_when_its_loss_ends_below_the_unigram_entropy_by_its_margin():
    targets = text_runs.loss_targets(runs({"mlm": [4.6, 4.8], "next-token": [3.9, 4.2]}), unigram_entropy=5.0)
    assert text_runs.learned_by(targets, "objective") == {"mlm": False, "next-token": False}
    assert text_runs.learned(targets, objective="mlm", seed=0) and text_runs.learned(
        targets, objective="next-token", seed=0
    )
    assert not text_runs.learned(targets)


def test_learned_is_false_when_no_run_matches():
    targets = text_runs.loss_targets(runs({"mlm": [4.0]}), unigram_entropy=5.0)
    assert text_runs.learned(targets, objective="mlm") and not text_runs.learned(targets, objective="next-token")


def test_an_unknown_run_key_is_named():
    targets = text_runs.loss_targets(runs({"mlm": [4.0]}), unigram_entropy=5.0)
    with pytest.raises(ValueError, match="no key 'init'"):
        text_runs.learned(targets, init="bert")


def test_a_run_shared_by_two_datasets_is_counted_once():
    baselines = runs({"mlm": [4.0, 4.0]}, inits=["bert"])
    treated = runs({"mlm": [4.0, 4.0]}, inits=["symmetric"])
    both = text_runs.loss_targets([baselines, treated, baselines], unigram_entropy=5.0)
    assert len(both) == 4 and both.index.names == ["objective", "init", "seed"]


def test_the_loss_target_facts_name_only_the_runs_short_of_their_target():
    targets = text_runs.loss_targets(runs({"mlm": [4.6, 4.8]}), unigram_entropy=5.0)
    gate = text_runs.loss_target_facts(targets, 5.0)
    assert not gate.all_met and (gate.met, gate.runs, gate.margins) == ("1", "2 runs", "`mlm` 0.3")
    assert (gate.verdict, gate.reason) == (stats.CANNOT_TELL, stats.NOT_LEARNED)
    assert text_runs.missed_targets(targets) == [text_runs.MissedTargetFacts("`mlm` seed 1", "0.20", "below", "0.3")]


def test_a_run_above_the_unigram_entropy_is_said_to_end_above_it():
    (missed,) = text_runs.missed_targets(text_runs.loss_targets(runs({"mlm": [5.5]}), 5.0))
    assert (missed.distance, missed.side) == ("0.50", "above")


def test_the_loss_target_facts_say_every_run_learned():
    targets = text_runs.loss_targets(runs({"mlm": [4.0]}), 5.0)
    gate = text_runs.loss_target_facts(targets, 5.0)
    assert gate.all_met and (gate.met, gate.runs, gate.unigram_entropy) == ("1", "1 run", "5.000")
    assert text_runs.missed_targets(targets) == []


def test_no_finding_names_the_missing_seeds_or_learning():
    assert text_runs.no_finding(5) == ""
    assert text_runs.no_finding(2) == "2 seeds, too few to compare"
    assert text_runs.no_finding(5, learned=False) == stats.NOT_LEARNED


def test_loss_targets_compare_each_run_with_the_unigram_entropy_and_its_objectives_margin():
    ds = xr.Dataset(
        {
            "val_loss": (
                ("objective", "seed", "step"),
                [[[np.nan, 5.0, 4.6], [np.nan, 5.0, 4.8]], [[6.0, 4.5, 3.9], [6.0, 4.5, 4.2]]],
            )
        },
        coords={"objective": ["mlm", "next-token"], "seed": [0, 1], "step": [0, 10, 20]},
    )
    table = text_runs.loss_targets(ds, unigram_entropy=5.0)
    assert table.loc[("mlm", 0), "below_unigram"] == pytest.approx(0.4)
    assert list(table["met"]) == [True, False, True, False]  # margins 0.3 (mlm) and 1.0 (next-token)
    assert list(table["target"]) == [0.3, 0.3, 1.0, 1.0]
