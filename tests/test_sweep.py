"""``attnstruct sweep``: the paper's list against a stand-in hub, resume, failures by kind, one-line bad input, and
its dataset, the one per-model dataset of :mod:`attnstruct.checkpoints.tables`."""

import json

import pandas as pd
import pytest
import torch
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
    assert len(str(one.revision.values)) == 40 and float(one.bytes_fetched) > 0 and float(one.n_params) > 0
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
