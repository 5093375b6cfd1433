"""Models by hub id, against a stand-in hub on 127.0.0.1: same scores as local, query/key bytes only, cached."""

import json

import pytest
import torch

from attnstruct import cli
from attnstruct.checkpoints.hub import HubSettings, open_hub_model, parse_hub_id
from attnstruct.checkpoints.resolve import open_checkpoint
from attnstruct.checkpoints.scoring import score_model

from conftest import tiny

pytestmark = pytest.mark.hub


def test_hub_ids_parse_with_and_without_revision():
    assert parse_hub_id("org/name") == ("org/name", "main")
    assert parse_hub_id("gpt2@abc123") == ("gpt2", "abc123")
    for bad in ("a/b/c", "model.safetensors", "./x", "org/name@"):
        with pytest.raises(ValueError):
            parse_hub_id(bad)


@pytest.mark.parametrize("repo", ["tiny/bert", "tiny/llama-gqa-sharded", "tiny/bart", "tiny/gpt2"])
def test_scores_by_name_equal_scores_of_the_local_folder(hub, repos, repo):
    by_name = score_model(repo, per_head=True)
    local = score_model(repos[repo], per_head=True)
    assert by_name.equals(local)


def test_a_sharded_repository_is_read_from_several_shards(hub, repos):
    shards = {
        f
        for f in json.loads((repos["tiny/llama-gqa-sharded"] / "model.safetensors.index.json").read_text())[
            "weight_map"
        ].values()
    }
    assert len(shards) > 1
    score_model("tiny/llama-gqa-sharded")
    asked = {path.rsplit("/", 1)[-1] for _, path, _ in hub.requests if "/resolve/" in path}
    assert shards <= asked


def test_only_a_small_fraction_of_a_big_vocabulary_model_is_transferred(hub, repos):
    size = (repos["tiny/wide-vocab"] / "model.safetensors").stat().st_size
    score_model("tiny/wide-vocab")
    served = hub.bytes_served_for("tiny/wide-vocab")
    assert served < 0.05 * size, f"{served} of {size} bytes"
    weight_reads = [r for m, p, r in hub.requests if p.endswith("model.safetensors") and m == "GET"]
    assert weight_reads and all(r is not None and r.startswith("bytes=") for r in weight_reads)


def test_a_second_run_does_no_network_io(hub):
    first = score_model("tiny/llama-gqa-sharded")
    hub.reset_counters()
    second = score_model("tiny/llama-gqa-sharded")
    assert second.equals(first)
    assert hub.requests == [] and hub.bytes_served == 0


def test_a_second_run_works_offline_and_an_uncached_model_is_one_line_exit_2(hub, monkeypatch, capsys):
    assert cli.main(["score", "tiny/bert"]) == 0
    online = capsys.readouterr().out
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.reset_counters()
    assert cli.main(["score", "tiny/bert"]) == 0
    assert capsys.readouterr().out == online and hub.requests == []
    assert cli.main(["score", "tiny/gpt2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnstruct: error: offline: tiny/gpt2") and "\n" not in err


def test_parameters_are_counted_from_the_headers_as_num_parameters_counts_them(hub):
    settings = HubSettings.from_env()
    for repo, name in (
        ("tiny/bert", "bert"),
        ("tiny/gpt2", "gpt2"),
        ("tiny/bart", "bart"),
        ("tiny/llama-gqa-sharded", "llama"),
    ):
        model = open_hub_model(repo, settings=settings)
        try:
            assert model.n_params == tiny(name).num_parameters(), repo
        finally:
            model.close()


def test_a_repository_with_only_pytorch_model_bin_is_read_by_ranges(hub, repos, capsys):
    with open_checkpoint("tiny/bin-only") as checkpoint:
        assert checkpoint.kind == "ranges" and checkpoint.n_params == tiny("bert").num_parameters()
    table = score_model("tiny/bin-only")
    assert "whole" not in capsys.readouterr().err
    assert table.equals(score_model(repos["tiny/bin-only"]))
    size = (repos["tiny/bin-only"] / "pytorch_model.bin").stat().st_size
    weight_reads = [r for m, p, r in hub.requests if m == "GET" and p.endswith("pytorch_model.bin")]
    assert weight_reads and all(r is not None and r.startswith("bytes=") for r in weight_reads)
    assert hub.bytes_served_for("tiny/bin-only") < size


def test_a_revision_pins_the_commit(hub, repos):
    model = open_hub_model("tiny/bert")
    commit = model.commit
    model.close()
    again = open_hub_model(f"tiny/bert@{commit}")
    assert again.commit == commit and again.revision == commit
    again.close()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["score", "nobody/nothing"], "not found: nobody/nothing"),
        (["score", "tiny/bert@no-such-branch"], "not found: tiny/bert@no-such-branch"),
        (["score", "tiny/bert", "--device", "tpu"], "unknown device"),
    ],
)
def test_bad_hub_input_is_one_line_with_exit_2(hub, capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_exits_2_before_any_request(hub, capsys):
    assert cli.main(["score", "tiny/bert", "--device", "cuda"]) == 2
    assert "no CUDA device" in capsys.readouterr().err and hub.requests == []


def test_truncated_transfer_is_named(hub, repos, capsys):
    hub.truncate("tiny/gpt2", "model.safetensors", keep=100)
    assert cli.main(["score", "tiny/gpt2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "truncated" in err and "\n" not in err


def test_a_complete_snapshot_in_the_hub_cache_is_read_without_requests(hub, repos):
    from huggingface_hub import hf_hub_download

    settings = HubSettings.from_env()
    for file in ("config.json", "model.safetensors"):
        hf_hub_download("tiny/bert", file, cache_dir=settings.hub_cache, endpoint=hub.url, token=False)
    hub.reset_counters()
    with open_checkpoint("tiny/bert") as checkpoint:
        assert checkpoint.kind == "snapshot" and len(checkpoint.revision) == 40
        assert checkpoint.n_params == tiny("bert").num_parameters()
        table = score_model("tiny/bert")
    assert hub.requests == [] and table.equals(score_model(repos["tiny/bert"]))


def test_tensors_that_touch_in_the_file_come_in_one_request(hub):
    score_model("tiny/bert")  # 2 layers; key.bias, key.weight, query.bias, query.weight lie next to each other
    reads = [r for m, p, r in hub.requests if m == "GET" and p.endswith("model.safetensors")]
    assert len(reads) == 2 + 2  # the header length, the header, then one range per layer


@pytest.mark.parametrize("repo", ["tiny/llama-gqa-sharded", "tiny/bin-only"])
def test_scores_survive_a_cdn_redirect_rate_limits_a_server_error_and_a_broken_transfer(hub, repos, repo):
    """What the real hub does, all at once: large files answer with a redirect to a CDN on another origin (which
    must never see the token), every third request for the weights is rate limited with Retry-After (the API
    calls' retries are tested in test_hub_client.py), one range read gets a 503 and one breaks off mid-body. The
    scores are those of the local folder, and every retry is counted."""
    from attnstruct.checkpoints import hub_client

    weights = "model-0000" if repo == "tiny/llama-gqa-sharded" else "pytorch_model.bin"
    hub.redirect_large()
    hub.rate_limit(every=3, retry_after=2, path=weights)
    hub.fail_once(weights, 503, method="GET")
    hub.break_once(weights)
    hub_client.DEFAULT_COUNTER.reset()
    by_name = score_model(repo, per_head=True)
    assert by_name.equals(score_model(repos[repo], per_head=True))
    retries = hub_client.DEFAULT_COUNTER.retries
    assert retries["server error"] == 1 and retries["broken transfer"] == 1 and retries["rate limited"] >= 1
    assert hub.waits.count(2.0) == retries["rate limited"]  # each rate limit waited its Retry-After
    assert hub.cdn_requests and not any(auth for *_, auth in hub.cdn_requests)
    assert all(r is not None and r.startswith("bytes=") for m, p, r, _ in hub.cdn_requests if m == "GET")


def test_a_sweep_says_in_one_line_how_many_requests_it_retried(hub, repos, tmp_path, capsys):
    listing = tmp_path / "models.txt"
    listing.write_text("tiny/bert\ntiny/bin-only\n")
    hub.rate_limit(every=4, retry_after=1, path="model.")  # the weights: range reads
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "2 scored" in err and "hub: " in err and "rate limited" in err
    from attnstruct.results import load_dataset

    assert "rate limited" in load_dataset(tmp_path / "out" / "sweep.nc").attrs["hub_retries"]
