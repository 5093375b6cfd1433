"""``attnstruct sweep``: the paper's list against a stand-in hub, resume, failures by kind, one-line bad input, and
its dataset, the one per-model dataset of :mod:`attnstruct.checkpoints.tables`; ``attnstruct revisions`` and a
checkpoint series swept whole or in shards that ``--combine`` merges."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr
from safetensors.torch import save_file

from attnstruct import cli
from attnstruct.checkpoints import sweep, tables
from attnstruct.checkpoints.extract import FAILURE_KINDS
from attnstruct.checkpoints.extract.blocks import STACKS
from attnstruct.checkpoints.scoring import score_model
from attnstruct.results import load_dataset, save_dataset

pytestmark = pytest.mark.hub

PAPER_STANDINS = {  # paper id -> the tiny repository served under it
    "bert-base-uncased": "tiny/bert",
    "gpt2": "tiny/gpt2",
    "facebook/bart-base": "tiny/bart",
    "meta-llama/Llama-2-7b-hf": "tiny/llama-gqa-sharded",
}


@pytest.fixture
def paper_hub(hub, repos, tmp_path):
    """The stand-in hub with tiny models under four of the paper's ids, and one failure of each kind."""
    for paper_id, repo in PAPER_STANDINS.items():
        hub.add_folder(paper_id, repos[repo])
    hub.add_folder("meta-llama/Llama-3.2-1B", repos["tiny/llama-gqa-sharded"], gated_token="hf_someone_else")
    unsupported = tmp_path / "openai-gpt"
    unsupported.mkdir()
    (unsupported / "config.json").write_text(json.dumps({"model_type": "openai-gpt", "n_head": 2}))
    save_file({"h.0.attn.c_attn.weight": torch.zeros(4, 12)}, unsupported / "model.safetensors")
    hub.add_folder("openai-gpt", unsupported)
    hub.add_folder("EleutherAI/pythia-14m", repos["tiny/gpt2"])
    hub.truncate("EleutherAI/pythia-14m", "model.safetensors", keep=200)
    return hub


def test_the_paper_sweep_scores_what_it_can_and_lists_every_failure(paper_hub, repos, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert cli.main(["sweep", "paper", "--out", str(out), "--workers", "4"]) == 0
    paper = sweep.read_model_list("paper")
    failures = pd.read_csv(out / "failures.csv")
    assert sorted(p.stem.split(".")[0] for p in (out / "models").glob("*.nc")) == sorted(
        sweep.file_stem(m).split(".")[0] for m in PAPER_STANDINS
    )
    assert len(failures) == len(paper) - len(PAPER_STANDINS)
    kinds = failures.set_index("model")["kind"]
    assert kinds["meta-llama/Llama-3.2-1B"] == "gated"
    assert kinds["openai-gpt"] == "unsupported architecture"
    assert kinds["EleutherAI/pythia-14m"] == "truncated"
    assert kinds["albert-base-v2"] == "not found"
    assert set(kinds) <= set(FAILURE_KINDS)
    assert all("\n" not in r for r in failures["reason"])
    combined = load_dataset(out / "sweep.nc")
    assert list(combined.model.values) == [m for m in paper if m in PAPER_STANDINS]
    one = combined.sel(model="facebook/bart-base")
    assert str(one.role.values) == "encoder-decoder" and str(one.family.values) == "BART"
    assert (
        str(one.revision.values) == ""
        and len(str(one.commit.values)) == 40
        and float(one.bytes_fetched) > 0
        and float(one.n_params) > 0
    )
    local = score_model(repos["tiny/bart"])
    ours = one.symmetry.sel(stack="decoder").dropna("layer").values
    assert ours.tolist() == local[local["stack"] == "decoder"]["symmetry"].tolist()
    assert "4 scored, 0 done before" in capsys.readouterr().err


def test_an_interrupted_sweep_resumes_without_rescoring(hub, tmp_path, monkeypatch):
    models = ["tiny/bert", "tiny/gpt2", "tiny/bart", "tiny/llama-gqa-sharded"]
    real = sweep.score_one

    def interrupted(model, **kw):
        if model == "tiny/bart":
            raise KeyboardInterrupt
        return real(model, **kw)

    monkeypatch.setattr(sweep, "score_one", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(models, tmp_path / "out", workers=1)
    assert len(list((tmp_path / "out" / "models").glob("*.nc"))) == 2
    assert not (tmp_path / "out" / "sweep.nc").exists()
    monkeypatch.setattr(sweep, "score_one", real)
    hub.reset_counters()
    result = sweep.run_sweep(models, tmp_path / "out", workers=1)
    assert result.skipped == models[:2] and sorted(result.scored) == sorted(models[2:])
    assert hub.bytes_served_for("tiny/bert") == hub.bytes_served_for("tiny/gpt2") == 0
    assert list(load_dataset(tmp_path / "out" / "sweep.nc").model.values) == models


def test_other_settings_rescore_and_per_head_adds_head_scores(hub, tmp_path):
    first = sweep.run_sweep(["tiny/bert"], tmp_path)
    assert first.scored == ["tiny/bert"]
    second = sweep.run_sweep(["tiny/bert"], tmp_path, per_head=True)
    assert second.scored == ["tiny/bert"] and second.skipped == []
    ds = load_dataset(tmp_path / "sweep.nc")
    assert ds.head_symmetry.sizes["head"] == 4 and "of each head" in ds.attrs["scored_matrix"]


def test_the_sweeps_dataset_is_the_one_per_model_dataset(hub, tmp_path):
    ds = load_dataset(sweep.run_sweep(["tiny/bart", "tiny/gpt2"], tmp_path).path)
    assert set(tables.MODEL_COORDS) | {"relative_depth"} <= set(ds.coords)
    assert ds.role.values.tolist() == ["encoder-decoder", "decoder"] and tuple(ds["stack"].values) == STACKS
    assert ds["extras"].dims == ("model", "stack") and ds["extras"].sel(model="tiny/gpt2", stack="encoder") == ""
    assert ds.relative_depth.sel(model="tiny/gpt2").values[0] == 0.0


def test_a_model_file_of_another_layout_is_scored_again(hub, tmp_path):
    sweep.run_sweep(["tiny/bert"], tmp_path)
    (path,) = (tmp_path / "models").glob("*.nc")
    old = load_dataset(path)
    old.attrs["parameters"] = json.dumps(
        {k: v for k, v in json.loads(old.attrs["parameters"]).items() if k != "layout"}
    )
    save_dataset(old, path)
    again = sweep.run_sweep(["tiny/bert"], tmp_path)
    assert again.scored == ["tiny/bert"] and again.skipped == []
    assert json.loads(load_dataset(path).attrs["parameters"])["layout"] == tables.LAYOUT


def test_a_list_mixes_local_paths_and_hub_ids(hub, repos, tmp_path):
    listing = tmp_path / "models.txt"
    listing.write_text(f"# two models\n{repos['tiny/gpt2']}\n\ntiny/bert  # by id\n")
    assert sweep.read_model_list(str(listing)) == [str(repos["tiny/gpt2"]), "tiny/bert"]
    result = sweep.run_sweep(sweep.read_model_list(str(listing)), tmp_path / "out")
    ds = load_dataset(result.path)
    assert list(ds.source.values) == ["local", "ranges"]


def test_offline_without_cache_is_a_listed_failure(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = sweep.run_sweep(["tiny/bert"], tmp_path)
    assert [f["kind"] for f in result.failures] == ["offline"] and result.path is None
    assert pd.read_csv(tmp_path / "failures.csv")["kind"].tolist() == ["offline"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--device", "tpu"], "unknown device"),
    ],
)
def test_bad_sweep_options_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, extra, message):
    listing = tmp_path / "models.txt"
    listing.write_text("tiny/bert\n")
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_bad_lists_are_one_line_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    no_column = tmp_path / "models.csv"
    no_column.write_text("name\nx\n")
    taken = tmp_path / "a-file"
    taken.write_text("")
    for argv, message in (
        ([str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")], "is not a file"),
        ([str(empty), "--out", str(tmp_path / "o")], "names no model"),
        ([str(no_column), "--out", str(tmp_path / "o")], "needs a 'model' column"),
        (["paper", "--out", str(taken)], "exists and is not a folder"),
    ):
        assert cli.main(["sweep", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, argv
    assert not (tmp_path / "o").exists()


def test_file_stems_are_safe_and_distinct():
    stems = {sweep.file_stem(m) for m in ("org/name", "org--name", "org/name@v1", "../x")}
    assert len(stems) == 4 and all("/" not in s and not s.startswith(".") for s in stems)


def test_the_command_line_guide_counts_the_papers_models_from_the_reference_table():
    from conftest import ROOT

    n = len(sweep.read_model_list("paper"))
    assert (
        f"the {n} distinct models of `src/attnstruct/reference/paper_reported_pretrained.csv`"
        in (ROOT / "docs" / "command-line.md").read_text()
    )


# A checkpoint series: tiny BERTs of different seeds as branches and tags of one repository, served out of order.
SERIES = {"main": False, "step10": False, "step0": False, "step2": False, "decay3": True, "ext5": True, "step100": True}
IN_ORDER = ["step0", "step2", "step10", "step100", "ext5", "decay3", "main"]
STEPS = [0, 2, 10, 100, 5, 3, math.nan]


@pytest.fixture(scope="module")
def series_folders(tmp_path_factory):
    from conftest import tiny

    root = tmp_path_factory.mktemp("series")
    folders = {}
    for seed, revision in enumerate(SERIES):
        folders[revision] = root / revision
        tiny("bert", seed=seed).save_pretrained(folders[revision])
    return folders


@pytest.fixture
def series(hub, series_folders):
    """``org/series`` on the stand-in hub; returns each revision's commit."""
    return {r: hub.add_folder("org/series", series_folders[r], revision=r, tag=SERIES[r]) for r in SERIES}


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("attnstruct: error:"), err
    return err


def fresh_caches(monkeypatch, folder):
    """Caches of their own, so that a run fetches (and counts) the same bytes as another."""
    monkeypatch.setenv("HF_HUB_CACHE", str(folder / "hf-cache"))
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(folder / "attnstruct-cache"))


def test_revisions_prints_sweep_lines_in_step_order_and_writes_the_table(series, tmp_path, capsys):
    assert cli.main(["revisions", "org/series", "--out", str(tmp_path / "series.csv")]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"org/series@{r}" for r in IN_ORDER] and "wrote" in err
    table = pd.read_csv(tmp_path / "series.csv", dtype={"revision": str, "commit": str})
    assert list(table.columns) == ["model", "revision", "kind", "commit", "step", "tokens", "phase"]
    assert table["revision"].tolist() == IN_ORDER
    assert table["kind"].tolist() == ["branch", "branch", "branch", "tag", "tag", "tag", "branch"]
    assert table["commit"].tolist() == [series[r] for r in IN_ORDER]
    assert table["step"].tolist()[:6] == STEPS[:6] and math.isnan(table["step"].iloc[6])
    assert sweep.read_model_list(str(tmp_path / "series.csv")) == out.splitlines()
    assert cli.main(["revisions", "org/series", "--match", "^(step1|ext)"]) == 0
    assert capsys.readouterr().out.split() == ["org/series@step10", "org/series@step100", "org/series@ext5"]


def test_a_sweep_over_a_series_carries_each_revision_and_its_step(series, series_folders, tmp_path, capsys):
    assert cli.main(["revisions", "org/series"]) == 0
    listing = tmp_path / "series.txt"
    listing.write_text(capsys.readouterr().out)
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out")]) == 0
    ds = load_dataset(tmp_path / "out" / "sweep.nc")
    assert ds.model.values.tolist() == [f"org/series@{r}" for r in IN_ORDER]
    assert ds.revision.values.tolist() == IN_ORDER and ds.commit.values.tolist() == [series[r] for r in IN_ORDER]
    np.testing.assert_array_equal(ds.step.values, STEPS)
    np.testing.assert_array_equal(ds.phase.values, [0, 0, 0, 0, 1, 2, math.nan])
    assert ds.tokens.isnull().all() and ds.step.dtype == ds.tokens.dtype == np.float64
    assert ds.where(ds.phase == 0, drop=True).revision.values.tolist() == IN_ORDER[:4]
    for revision, folder in series_folders.items():
        local = score_model(folder)
        ours = ds.symmetry.sel(model=f"org/series@{revision}", stack="encoder").dropna("layer").values
        assert ours.tolist() == local["symmetry"].tolist(), revision
    scores = {r: tuple(ds.symmetry.sel(model=f"org/series@{r}", stack="encoder").values) for r in IN_ORDER}
    assert len(set(scores.values())) == len(IN_ORDER)  # each revision is its own model


def test_per_model_files_carry_the_series_coordinates_and_the_layout(series, series_folders, tmp_path):
    local = str(series_folders["step10"])  # a local folder: its name gives the step, and there is no revision
    result = sweep.run_sweep(["org/series@ext5", local], tmp_path / "out")
    assert tables.LAYOUT == "model_dataset/4" and sorted(result.scored) == sorted(["org/series@ext5", local])
    one = load_dataset(tmp_path / "out" / "models" / f"{sweep.file_stem('org/series@ext5')}.nc").squeeze("model")
    assert (one.revision.item(), one.step.item(), one.phase.item()) == ("ext5", 5.0, 1.0)
    assert one.commit.item() == series["ext5"] and json.loads(one.attrs["parameters"])["layout"] == tables.LAYOUT
    other = load_dataset(result.path).sel(model=local)
    assert (other.revision.item(), other.commit.item(), other.step.item()) == ("", "", 10.0)


def test_shards_combined_are_the_unsharded_sweep(series, tmp_path, monkeypatch, capsys):
    listed = ["main", "step100", "step0", "ext5", "step2", "decay3", "step10"]  # not in step order: the list's wins
    listing = tmp_path / "series.txt"
    listing.write_text("".join(f"org/series@{r}\n" for r in listed))
    fresh_caches(monkeypatch, tmp_path / "whole")
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "whole")]) == 0
    for k in (1, 2):
        fresh_caches(monkeypatch, tmp_path / f"part{k}")
        assert cli.main(["sweep", str(listing), "--out", str(tmp_path / f"part{k}"), "--shard", f"{k}/2"]) == 0
        part = load_dataset(tmp_path / f"part{k}" / "sweep.nc")
        assert part.revision.values.tolist() == listed[k - 1 :: 2]
        recorded = json.loads(part.attrs["parameters"])
        assert recorded["shard"] == f"{k}/2" and recorded["listing"] == [f"org/series@{r}" for r in listed]
    capsys.readouterr()
    parts = [str(tmp_path / "part2"), str(tmp_path / "part1")]  # the list's order, whatever the parts' order
    assert cli.main(["sweep", "--combine", *parts, "--out", str(tmp_path / "combined")]) == 0
    assert "7 models from 2 parts" in capsys.readouterr().err
    whole = load_dataset(tmp_path / "whole" / "sweep.nc")
    combined = load_dataset(tmp_path / "combined" / "sweep.nc")
    xr.testing.assert_equal(combined, whole)
    assert combined.revision.values.tolist() == listed
    assert json.loads(combined.attrs["parameters"])["models"] == whole.model.values.tolist()


def test_parts_without_their_list_combine_in_training_order_with_their_failures(series, tmp_path, capsys):
    missing = "org/series@step999"
    for k, models in ((1, ["org/series@main", "org/series@step100", missing]), (2, ["org/series@step2"])):
        result = sweep.run_sweep(models, tmp_path / f"part{k}")
        (tmp_path / f"part{k}" / "sweep.nc").unlink()
        assert [f["model"] for f in result.failures] == ([missing] if k == 1 else [])
    assert (
        cli.main(["sweep", "--combine", str(tmp_path / "part1"), str(tmp_path / "part2"), "--out", str(tmp_path / "c")])
        == 0
    )
    combined = load_dataset(tmp_path / "c" / "sweep.nc")
    assert combined.revision.values.tolist() == ["step2", "step100", "main"]
    failures = pd.read_csv(tmp_path / "c" / "failures.csv")
    assert failures["model"].tolist() == [missing] and failures["kind"].tolist() == ["not found"]


def test_combine_refuses_parts_scored_otherwise_or_disagreeing(series, tmp_path, capsys):
    sweep.run_sweep(["org/series@step0"], tmp_path / "a")
    sweep.run_sweep(["org/series@step2"], tmp_path / "b", per_head=True)
    assert cli.main(["sweep", "--combine", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c")]) == 2
    assert "other settings (per_head False vs True)" in one_line(capsys)
    sweep.run_sweep(["org/series@step0"], tmp_path / "d")
    (path,) = (tmp_path / "d" / "models").glob("*.nc")
    changed = load_dataset(path)
    changed["symmetry"] = changed["symmetry"] + 0.5
    save_dataset(changed, path)
    assert cli.main(["sweep", "--combine", str(tmp_path / "a"), str(tmp_path / "d"), "--out", str(tmp_path / "c")]) == 2
    assert "org/series@step0 was scored twice with different results" in one_line(capsys)
    assert not (tmp_path / "c").exists()
    assert cli.main(["sweep", "--combine", str(tmp_path / "a"), str(tmp_path / "a"), "--out", str(tmp_path / "c")]) == 0
    assert load_dataset(tmp_path / "c" / "sweep.nc").model.values.tolist() == ["org/series@step0"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--out", "{tmp}/o"], "name the model LIST to sweep, or --combine"),
        (["{tmp}/list.txt", "--out", "{tmp}/o", "--shard", "0/3"], "--shard must be K/N"),
        (["{tmp}/list.txt", "--out", "{tmp}/o", "--shard", "4/3"], "--shard must be K/N"),
        (["{tmp}/list.txt", "--out", "{tmp}/o", "--shard", "a/b"], "--shard must be K/N"),
        (["--combine", "--out", "{tmp}/o"], "--combine: expected at least one argument"),
        (["--combine", "{tmp}", "--out", "{tmp}/o"], "no models/ folder there"),
        (["--combine", "{tmp}/part", "--out", "{tmp}/o", "--shard", "1/2"], "give --shard only when scoring one"),
        (["{tmp}/list.txt", "--combine", "{tmp}/part", "--out", "{tmp}/o"], "takes no model list"),
        (["--combine", "{tmp}/part", "--out", "{tmp}/part"], "is one of the parts"),
    ],
)
def test_bad_shard_and_combine_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, argv, message):
    (tmp_path / "list.txt").write_text("tiny/bert\n")
    (tmp_path / "part" / "models").mkdir(parents=True)
    assert cli.main(["sweep", *(a.format(tmp=tmp_path) for a in argv)]) == 2
    assert message in one_line(capsys)
    assert not (tmp_path / "o").exists() and not (tmp_path / "part" / "sweep.nc").exists()


def test_bad_revisions_input_is_one_line_exit_2(series, tmp_path, capsys, monkeypatch):
    for argv, message in (
        (["org/series@step0"], "without a revision"),
        (["org/series", "--match", "("], "is not a regular expression"),
        (["org/series", "--match", "^nothing$"], "no branch or tag of org/series matches"),
        (["org/series", "--out", str(tmp_path / "list.txt")], "--out must end in .csv"),
        (["org/absent"], "not found: org/absent"),
        ([], "the following arguments are required: repo"),
    ):
        assert cli.main(["revisions", *argv]) == 2, argv
        assert message in one_line(capsys), argv
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli.main(["revisions", "org/series"]) == 2
    assert "offline:" in one_line(capsys)
    assert not (tmp_path / "list.txt").exists()
