"""Notebook 08's analyses: the list of models, the sweep's outcome in words, the caveat groups and the dataset."""

import json

import pandas as pd
import pytest
import xarray as xr

from attnstruct.analyses import model_sweep
from attnstruct.checkpoints import sweep
from attnstruct.checkpoints.sweep import SweepResult


def test_a_list_of_models_is_taken_as_given():
    assert model_sweep.model_names(["org/a", "/some/path"]) == ["org/a", "/some/path"]


def test_paper_is_the_authors_list():
    assert model_sweep.model_names("paper") == sweep.read_model_list("paper")


def test_a_zoo_selection_must_have_been_fetched(tmp_path):
    with pytest.raises(RuntimeError, match="run: attnstruct fetch-models minilm-l6 smollm2-135m whisper-base$"):
        model_sweep.model_names("core", cache_dir=tmp_path)


def test_describe_run_counts_what_was_scored_skipped_and_failed():
    run = SweepResult(scored=["a"], skipped=["b", "c"], failures=[{"model": "d", "kind": "gated", "reason": "x"}])
    assert model_sweep.describe_run(run, ["a", "b", "c", "d"], "cpu") == (
        "4 models on cpu: 1 scored now, 2 done before, 1 failed."
    )
    assert model_sweep.failures(run).values.tolist() == [["d", "gated", "x"]]
    assert list(model_sweep.failures(SweepResult()).columns) == ["model", "kind", "reason"]


def test_no_scored_model_points_to_the_failures(tmp_path):
    with pytest.raises(RuntimeError, match="no model could be scored; see .*failures.csv"):
        model_sweep.load_scores(SweepResult(), tmp_path)


@pytest.mark.parametrize(
    "caveats, group",
    [
        ("", "no known caveat"),
        ("gqa_head_pairing_suspect", "gqa_head_pairing_suspect"),
        ("fused_qkv_branch_suspect", "fused_qkv_branch_suspect"),
        ("looks_random_init", "other caveat"),
        ("gqa_head_pairing_suspect;looks_random_init", "other caveat"),
    ],
)
def test_caveat_groups(caveats, group):
    assert model_sweep.caveat_group(caveats) == group


def test_with_caveat_groups_adds_a_column_with_a_colour_for_each():
    from attnstruct.report import plotting

    table = model_sweep.with_caveat_groups(pd.DataFrame({"caveats": ["", "scored_random_init"]}))
    assert table["caveat_group"].tolist() == ["no known caveat", "other caveat"]
    assert set(table["caveat_group"]) <= set(plotting.CAVEAT_COLORS)


def test_the_results_dataset_keeps_the_scores_and_records_the_run():
    scores = xr.Dataset({"symmetry": ("model", [0.5])}, coords={"model": ["m"]}, attrs={"scored_matrix": "W_qk"})
    ds = model_sweep.results_dataset(scores, parameters={"models": "core"}, failures=2)
    xr.testing.assert_identical(ds.drop_attrs(), scores.drop_attrs())
    assert json.loads(ds.attrs["parameters"]) == {"models": "core"}
    assert (
        ds.attrs["scored_matrix"] == "W_qk" and ds.attrs["failures"] == 2 and scores.attrs == {"scored_matrix": "W_qk"}
    )
