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
    assert str(one.role.values) == "encoder-decoder" and (one.family.item(), one.reader.item()) == ("bart", "BART")
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
        (["--workers", "0"], "argument --workers: must be a whole number, 1 or more"),
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
    assert tables.LAYOUT == "model_dataset/6" and sorted(result.scored) == sorted(["org/series@ext5", local])
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


def colliding_names() -> tuple[str, str]:
    """Two model names whose readable part (the first 80 characters) is the same and whose first 32 bits of sha1,
    the hash of the earlier file names, agree: about 2**16 names to try (the birthday bound)."""
    import hashlib

    seen = {}
    for i in range(2**20):
        name = "org/" + "x" * 80 + str(i)
        short = hashlib.sha1(name.encode()).hexdigest()[:8]
        if short in seen:
            return seen[short], name
        seen[short] = name
    raise AssertionError("no collision in 2**20 names")


def test_two_names_whose_short_hashes_collide_get_files_of_their_own():
    first, second = colliding_names()
    assert sweep.file_stem(first) != sweep.file_stem(second)


def test_a_file_holding_another_models_scores_is_scored_again(hub, tmp_path):
    sweep.run_sweep(["tiny/bert"], tmp_path)
    (path,) = (tmp_path / "models").glob("*.nc")
    path.rename(tmp_path / "models" / f"{sweep.file_stem('tiny/gpt2')}.nc")  # as a clash of file names would leave it
    again = sweep.run_sweep(["tiny/gpt2"], tmp_path)
    assert again.scored == ["tiny/gpt2"] and again.skipped == []
    assert load_dataset(tmp_path / "sweep.nc").model.values.tolist() == ["tiny/gpt2"]


def test_a_folder_with_the_earlier_file_names_resumes_without_rescoring(hub, tmp_path):
    sweep.run_sweep(["tiny/bert"], tmp_path)
    (path,) = (tmp_path / "models").glob("*.nc")
    path.rename(tmp_path / "models" / f"{sweep.earlier_file_stem('tiny/bert')}.nc")
    hub.reset_counters()
    again = sweep.run_sweep(["tiny/bert"], tmp_path)
    assert again.skipped == ["tiny/bert"] and hub.bytes_served_for("tiny/bert") == 0
    assert [p.name for p in (tmp_path / "models").glob("*.nc")] == [f"{sweep.file_stem('tiny/bert')}.nc"]


def offline_list(tmp_path, monkeypatch) -> str:
    """A one-model list that a sweep run offline gets through at once (the model fails, offline)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    listing = tmp_path / "list.txt"
    listing.write_text("org/model\n")
    return str(listing)


def test_a_second_sweep_into_a_folder_in_use_is_refused_naming_the_folder_and_the_holder(tmp_path, capsys, monkeypatch):
    import os

    from attnstruct.results import output_lock

    from hostile import TreeWatch, assert_refused

    listing, out = offline_list(tmp_path, monkeypatch), tmp_path / "out"
    with output_lock(out, "sweep"), TreeWatch(tmp_path) as watch:
        status = cli.main(["sweep", listing, "--out", str(out)])
        assert_refused(status, capsys.readouterr().err, str(out), f"pid {os.getpid()}")
        assert watch.changed() == set()


def test_a_sweep_removes_the_temporary_files_a_killed_sweep_left(tmp_path, monkeypatch):
    listing, out = offline_list(tmp_path, monkeypatch), tmp_path / "out"
    (out / "models").mkdir(parents=True)
    left = [out / ".sweep.nc.k2j4h5g1.tmp", out / "models" / ".org--model.0123abcd.nc.x_y1z2w3.tmp"]
    for path in left:
        path.write_bytes(b"half a file")
    assert cli.main(["sweep", listing, "--out", str(out)]) == 1  # its one model is offline: no model scored
    assert not any(path.exists() for path in left)


def test_a_disk_failure_stops_the_sweep_in_one_line_and_keeps_the_files_written(hub, tmp_path, monkeypatch, capsys):
    import errno

    from attnstruct.results import OutputError

    from hostile import assert_refused

    real = sweep.save_dataset

    def full_after_one(dataset, path):
        if list(path.parent.glob("*.nc")):
            raise OutputError(path, "No space left on device", errno.ENOSPC)
        return real(dataset, path)

    monkeypatch.setattr(sweep, "save_dataset", full_after_one)
    listing = tmp_path / "list.txt"
    listing.write_text("tiny/bert\ntiny/gpt2\ntiny/bart\n")
    status = cli.main(["sweep", str(listing), "--out", str(tmp_path / "out"), "--workers", "1"])
    assert_refused(status, capsys.readouterr().err, "No space left on device", str(tmp_path / "out" / "models"))
    assert len(list((tmp_path / "out" / "models").glob("*.nc"))) == 1
    assert not (tmp_path / "out" / "sweep.nc").exists() and not (tmp_path / "out" / "failures.csv").exists()


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--num-std", "nan"], "--num-std"),
        (["--num-std", "inf"], "--num-std"),
        (["--num-std", "-1"], "--num-std"),
        (["--num-std", "\uff12"], "--num-std"),  # a full-width 2, which float() reads as 2
        (["--workers", "100000"], "--workers"),
        (["--workers", "\uff12"], "--workers"),
        (["--shard", "\uff11/\uff12"], "--shard"),  # full-width 1/2, which int() and \d read as digits
        (["--precision", "half"], "--precision"),
    ],
)
def test_bad_sweep_arguments_are_refused_before_anything_is_written(tmp_path, capsys, monkeypatch, extra, named):
    from hostile import TreeWatch, assert_refused

    listing = offline_list(tmp_path, monkeypatch)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["sweep", listing, "--out", str(tmp_path / "out"), *extra])
    assert_refused(status, capsys.readouterr().err, named)
    assert watch.changed() == set()


def test_an_empty_out_is_refused_rather_than_taken_for_the_current_folder(tmp_path, capsys, monkeypatch):
    from hostile import TreeWatch, assert_refused

    listing = offline_list(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["sweep", listing, "--out", ""])
    assert_refused(status, capsys.readouterr().err, "--out")
    assert watch.changed() == set()


def test_an_out_below_a_file_is_refused_in_one_line_naming_it(tmp_path, capsys, monkeypatch):
    from hostile import TreeWatch, assert_refused

    listing = offline_list(tmp_path, monkeypatch)
    (tmp_path / "a-file").write_text("")
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["sweep", listing, "--out", str(tmp_path / "a-file" / "out")])
    assert_refused(status, capsys.readouterr().err, str(tmp_path / "a-file"))
    assert watch.changed() == set()


@pytest.mark.parametrize(
    "name, content",
    [
        ("binary.txt", b"org/model\n\xff\xfe\x00\x81 not text\n"),
        ("nul.txt", b"org/model\n\x00org/other\n"),
        ("control.txt", b"org/model\x1b[2J\n"),
        ("huge.txt", b"x\n" * (9 * 2**20)),
        ("blank.txt", b"\n \n\t\n"),
        ("binary.csv", b"model\n\xff\xfe\x00\x81\n"),
        ("unclosed.csv", b'model\n"org/model\n'),
    ],
    ids=["binary", "nul", "control", "huge", "blank", "binary-csv", "unclosed-csv"],
)
def test_a_model_list_that_is_not_a_text_list_is_refused_naming_it(tmp_path, capsys, monkeypatch, name, content):
    from hostile import TreeWatch, assert_refused

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    listing = tmp_path / name
    listing.write_bytes(content)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["sweep", str(listing), "--out", str(tmp_path / "out")])
    assert_refused(status, capsys.readouterr().err, str(listing))
    assert watch.changed() == set()


@pytest.fixture(scope="module")
def one_part(repos, tmp_path_factory):
    """A sweep's folder of one local model (no hub needed), to copy and spoil."""
    part = tmp_path_factory.mktemp("part") / "part"
    sweep.run_sweep([str(repos["tiny/bert"])], part)
    return part


def _rewrite_attrs(path, **attrs):
    ds = load_dataset(path)
    ds.attrs.update(attrs)
    save_dataset(ds, path)


def _spoil(part, case):
    """Spoil a copy of a sweep's folder as a hostile one would be; returns the file the refusal must name."""
    (model,) = (part / "models").glob("*.nc")
    parameters = json.loads(load_dataset(model).attrs["parameters"])
    if case == "model-not-netcdf":
        model.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    elif case == "model-without-model":
        save_dataset(load_dataset(model).rename({"model": "other"}), model)
    elif case == "model-parameters-a-list":
        _rewrite_attrs(model, parameters="[1, 2]")
    elif case == "model-of-another-name":
        _rewrite_attrs(model, parameters=json.dumps(parameters | {"model": "org/else"}))
    elif case == "model-num-std-text":
        _rewrite_attrs(model, parameters=json.dumps(parameters | {"num_std": "2"}))
    elif case == "sweep-not-json":
        _rewrite_attrs(model := part / "sweep.nc", parameters="{nope")
    elif case == "listing-a-string":
        recorded = json.loads(load_dataset(part / "sweep.nc").attrs["parameters"])
        _rewrite_attrs(model := part / "sweep.nc", parameters=json.dumps(recorded | {"listing": "abc"}))
    elif case == "failures-not-csv":
        (model := part / "failures.csv").write_bytes(b'model,kind,reason\n"unclosed,\xff\n')
    elif case == "failures-other-columns":
        (model := part / "failures.csv").write_text("name\nx\n")
    elif case == "model-linking-out":
        import h5py

        with h5py.File(model, "r+") as f:
            f["borrowed"] = h5py.ExternalLink("/etc/hostname", "/")
    elif case == "link-out-of-the-part":
        outside = part.parent / "elsewhere.nc"
        model.rename(outside)
        model.symlink_to(outside)
    return model


@pytest.mark.parametrize(
    "case",
    [
        "model-not-netcdf",
        "model-without-model",
        "model-parameters-a-list",
        "model-of-another-name",
        "model-num-std-text",
        "sweep-not-json",
        "listing-a-string",
        "failures-not-csv",
        "failures-other-columns",
        "model-linking-out",
        "link-out-of-the-part",
    ],
)
def test_a_part_holding_files_a_sweep_does_not_write_is_refused_naming_the_file(one_part, tmp_path, capsys, case):
    import shutil

    from hostile import TreeWatch, assert_refused

    part = tmp_path / "part"
    shutil.copytree(one_part, part, symlinks=True)
    spoiled = _spoil(part, case)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["sweep", "--combine", str(part), "--out", str(tmp_path / "out")])
    assert_refused(status, capsys.readouterr().err, spoiled.name)
    assert watch.changed() == set()


def test_a_combine_into_a_folder_in_use_is_refused_naming_the_holder(one_part, tmp_path, capsys):
    import os

    from attnstruct.results import output_lock

    from hostile import TreeWatch, assert_refused

    with output_lock(tmp_path / "out", "sweep"), TreeWatch(tmp_path) as watch:
        status = cli.main(["sweep", "--combine", str(one_part), "--out", str(tmp_path / "out")])
        assert_refused(status, capsys.readouterr().err, str(tmp_path / "out"), f"pid {os.getpid()}")
        assert watch.changed() == set()


def _weights_of(folder, readme: str | None = None) -> dict[str, bytes]:
    files = {name: (folder / name).read_bytes() for name in ("config.json", "model.safetensors")}
    return files | ({"README.md": readme.encode()} if readme is not None else {})


def test_byte_identical_branches_are_reported_in_one_line_naming_both(hub, repos, tmp_path, capsys):
    """Two branches whose weights are byte-identical though their commits differ (a README apart), as later weights
    copied into earlier branches are on the hub (EleutherAI/pythia#205, #206, allenai/OLMo#915)."""
    import hashlib

    one = hub.add_repo("org/dup", _weights_of(repos["tiny/bert"], "step 1"), revision="step1")
    two = hub.add_repo("org/dup", _weights_of(repos["tiny/bert"], "step 2"), revision="step2")
    hub.add_repo("org/dup", _weights_of(repos["tiny/gpt2"]), revision="step3")
    assert one != two
    listing = tmp_path / "list.txt"
    listing.write_text("org/dup@step1\norg/dup@step2\norg/dup@step3\n")
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out")]) == 0
    digest = hashlib.sha256((repos["tiny/bert"] / "model.safetensors").read_bytes()).hexdigest()
    line = f"org/dup@step1 and org/dup@step2 hold byte-identical weights (sha256 {digest[:12]}...)"
    assert f"attnstruct: {line}" in capsys.readouterr().err.splitlines()
    assert json.loads(load_dataset(tmp_path / "out" / "sweep.nc").attrs["duplicates"]) == [line]


def test_the_sweeps_dataset_records_each_hub_models_weights_sha256(hub, repos, tmp_path):
    import hashlib

    ds = load_dataset(sweep.run_sweep(["tiny/bert", str(repos["tiny/gpt2"])], tmp_path).path)
    digest = hashlib.sha256((repos["tiny/bert"] / "model.safetensors").read_bytes()).hexdigest()
    assert ds.weights_sha256.values.tolist() == [digest, ""]  # a local checkpoint: not stated by a hub


def test_a_sweep_with_refresh_rescores_a_re_uploaded_branch_and_without_does_not(hub, repos, tmp_path, capsys):
    """Weights uploaded again into the same branch (EleutherAI/pythia#107): the pin of the first run holds, and no
    model info is asked for, until --refresh, which asks once per model and scores the branch's new commit."""
    hub.add_repo("org/run", _weights_of(repos["tiny/bert"]), revision="step10")
    listing, out = tmp_path / "list.txt", str(tmp_path / "out")
    listing.write_text("org/run@step10\n")
    assert cli.main(["sweep", str(listing), "--out", out]) == 0
    after = hub.add_repo("org/run", _weights_of(repos["tiny/wide-vocab"]), revision="step10")
    hub.reset_counters()
    assert cli.main(["sweep", str(listing), "--out", out]) == 0
    assert "0 scored, 1 done before" in capsys.readouterr().err and hub.requests == []
    assert cli.main(["sweep", str(listing), "--out", out, "--refresh"]) == 0
    assert "1 scored, 0 done before" in capsys.readouterr().err
    assert load_dataset(tmp_path / "out" / "sweep.nc").commit.values.tolist() == [after]
    assert len([p for _, p, _ in hub.requests if p.startswith("/api/")]) == 1


def test_an_invalid_token_stops_the_sweep_at_once_in_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from attnstruct.checkpoints.extract.blocks import ExtractionError

    opened = []

    def stale_token(model, **_):
        opened.append(model)
        raise ExtractionError("the hub refuses the token of HF_TOKEN; unset HF_TOKEN or log in again", "invalid token")

    monkeypatch.setattr(sweep, "score_one", stale_token)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"org/model-{i}\n" for i in range(6)))
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out"), "--workers", "1"]) == 2
    assert one_line(capsys).startswith("attnstruct: error: invalid token: the hub refuses the token")
    assert len(opened) <= 2 and not (tmp_path / "out" / "sweep.nc").exists()


def test_a_sweep_says_its_plan_before_it_starts_and_its_hub_calls_in_its_last_line(hub, repos, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text(f"tiny/bert\ntiny/gpt2\n{repos['tiny/bart']}\n")
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    plan = [line for line in out.splitlines() if line.startswith("attnstruct: plan: ")]
    assert len(plan) == 1 and "2 checkpoints, 4 resolver, 2 API" in plan[0] and "anonymous quota" in plan[0]
    calls = err.strip().splitlines()[-1].rsplit("; ", 1)[-1]
    resolvers, api = hub.calls("resolvers"), hub.calls("api")
    assert calls == f"hub calls: {resolvers} resolver, {api} API, {hub.calls('cdn')} CDN" and resolvers and api


def test_each_hub_model_records_its_resolver_and_api_calls_and_a_local_one_none(hub, repos, tmp_path):
    ds = load_dataset(sweep.run_sweep(["tiny/bert", str(repos["tiny/gpt2"])], tmp_path).path)
    assert ds.resolver_calls.values[0] >= 2 and ds.api_calls.values[0] == 1  # config and weights; the model info
    assert np.isnan(ds.resolver_calls.values[1]) and np.isnan(ds.api_calls.values[1])
