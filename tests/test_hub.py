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


def test_only_a_small_fraction_of_a_big_vocabulary_model_is_transferred(hub, repos, byte_exact_reads):
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


def test_tensors_that_touch_in_the_file_come_in_one_request(hub, byte_exact_reads):
    score_model("tiny/bert")  # 2 layers; key.bias, key.weight, query.bias, query.weight lie next to each other
    reads = [r for m, p, r in hub.requests if m == "GET" and p.endswith("model.safetensors")]
    assert len(reads) == 2 + 2  # the header length, the header, then one range per layer


@pytest.mark.parametrize("repo", ["tiny/llama-gqa-sharded", "tiny/bin-only"])
def test_scores_survive_a_cdn_redirect_rate_limits_a_server_error_and_a_broken_transfer(hub, repos, repo):
    """What the real hub does, all at once: large files answer with a redirect to a CDN on another origin (which
    must never see the token), every third request for the weights is rate limited with Retry-After (the API
    calls' retries are tested in test_hub_client.py), one range read gets a 503 and one breaks off mid-body. The
    scores are those of the local folder, and every retry is counted."""
    from attnstruct.hub_client import client as hub_client

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


@pytest.mark.parametrize(
    "text",
    [
        "org/name@main\n",
        "org/name\n",
        "org/name@step1\n/home/x/model",
        "org/name@a\tb",
        "org/name@.hidden",
        "org/name@a//b",
        "org/name@/main",
        "org/name@main/",
        "org/name@a/./b",
    ],
)
def test_a_hub_id_whose_revision_is_not_a_ref_name_is_refused(text):
    with pytest.raises(ValueError, match="not a hub model id"):
        parse_hub_id(text)


def test_revisions_with_slashes_dashes_and_dots_still_parse():
    assert parse_hub_id("org/name@refs/pr/1") == ("org/name", "refs/pr/1")
    assert parse_hub_id("allenai/OLMo-1B@step20000-tokens84B") == ("allenai/OLMo-1B", "step20000-tokens84B")
    assert parse_hub_id("org/name@v1.0") == ("org/name", "v1.0")


def _tiny_safetensors(header: dict | str, data: bytes) -> bytes:
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    return len(text).to_bytes(8, "little") + text + data


F32 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


TWICE = '{"a": %s, "a": %s}' % (json.dumps(F32), json.dumps(F32))  # the library keeps the last; the format forbids it


HEADERS = {
    "plain": ({"a": F32}, bytes(8), True),
    "metadata": ({"__metadata__": {"format": "pt"}, "a": F32}, bytes(8), True),
    "metadata-null": ({"__metadata__": None, "a": F32}, bytes(8), True),
    "padded": (json.dumps({"a": F32}) + "   ", bytes(8), True),  # spaces, as writers align the data
    "extra-field": ({"a": {**F32, "extra": 1}}, bytes(8), True),
    "empty-tensor": ({"z": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}, "a": F32}, bytes(8), True),
    "no-tensor": ({}, b"", True),
    "the-same-bytes-twice": ({"a": F32, "b": F32}, bytes(8), False),
    "not-from-the-start": ({"a": {**F32, "data_offsets": [8, 16]}}, bytes(16), False),
    "bytes-no-tensor-covers": ({"a": F32}, bytes(10), False),
    "bytes-not-the-shape": ({"a": {**F32, "shape": [3]}}, bytes(8), False),
    "unknown-dtype": ({"a": {**F32, "dtype": "F31"}}, bytes(8), False),
    "a-bool-in-a-shape": ({"a": {**F32, "shape": [True, 2]}}, bytes(8), False),
    "three-offsets": ({"a": {**F32, "data_offsets": [0, 8, 8]}}, bytes(8), False),
    "half-a-byte": ({"a": {"dtype": "F4", "shape": [1], "data_offsets": [0, 1]}}, bytes(1), False),
    "metadata-not-text": ({"__metadata__": {"format": 1}, "a": F32}, bytes(8), False),
    "a-nul-after-the-json": (json.dumps({"a": F32}) + "\0", bytes(8), False),
    "a-lone-surrogate": ('{"\\ud800": %s}' % json.dumps(F32), bytes(8), False),
    "a-name-twice": (TWICE, bytes(8), False),
}


@pytest.mark.parametrize("header, data, accepted", list(HEADERS.values()), ids=list(HEADERS))
def test_a_safetensors_header_is_refused_exactly_when_the_library_refuses_it(tmp_path, header, data, accepted):
    """The hub path's check of a header (attnstruct.checkpoints.safetensors_header) against the safetensors
    library's, on the same bytes: the same verdict, but for a name given twice, which the format forbids."""
    from safetensors import safe_open

    from attnstruct.checkpoints.extract.blocks import ExtractionError
    from attnstruct.checkpoints.safetensors_header import parse_header

    blob = _tiny_safetensors(header, data)
    (tmp_path / "x.safetensors").write_bytes(blob)
    try:
        with safe_open(tmp_path / "x.safetensors", "pt") as opened:
            [opened.get_tensor(name) for name in opened.keys()]
        library = True
    except Exception:  # noqa: BLE001 (the library's error types are not part of its interface)
        library = False
    assert library == (accepted or header == TWICE)
    n = int.from_bytes(blob[:8], "little")
    if accepted:
        parse_header(blob[8 : 8 + n], len(blob) - 8 - n, "x.safetensors")
    else:
        with pytest.raises(ExtractionError, match="x.safetensors"):
            parse_header(blob[8 : 8 + n], len(blob) - 8 - n, "x.safetensors")


def test_a_header_that_is_unusual_but_valid_is_scored_on_the_hub(hub, repos, capsys):
    blob = (repos["tiny/bert"] / "model.safetensors").read_bytes()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + n])
    header["__metadata__"] = {"format": "pt", "note": "padded"}
    text = json.dumps(header).encode() + b" " * 13
    padded = len(text).to_bytes(8, "little") + text + blob[8 + n :]
    config = (repos["tiny/bert"] / "config.json").read_bytes()
    hub.add_repo("odd/padded", {"config.json": config, "model.safetensors": padded})
    assert score_model("odd/padded").equals(score_model(repos["tiny/bert"]))


def test_a_range_reader_refuses_a_name_or_commit_that_would_leave_its_folder(tmp_path):
    from attnstruct.checkpoints.extract.blocks import ExtractionError
    from attnstruct.checkpoints.remote_safetensors import RangeReader

    settings = {"endpoint": "http://127.0.0.1:9", "token": None, "cache": tmp_path, "offline": True}
    with pytest.raises(ExtractionError, match="commit id"):
        RangeReader("org/name", "../../x", **settings)
    reader = RangeReader("org/name", "0" * 40, **settings)
    for name in ("..", "../../../x", "/etc/passwd", "a/../../b"):
        with pytest.raises(ExtractionError, match="leave its folder|not a relative file name"):
            reader.read(name, 0, 8)


def _config_and_weights(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in ("config.json", "model.safetensors")}


@pytest.mark.parametrize("files", [{"config.json"}, {"README.md"}], ids=["config-only", "nothing-of-a-model"])
def test_a_branch_without_weights_fails_with_the_kind_no_weights(hub, repos, files):
    """PolyPythia branches hold a config.json and no weight file (EleutherAI/pythia#202): not an architecture."""
    from attnstruct.checkpoints.extract.blocks import ExtractionError

    present = {"config.json": (repos["tiny/bert"] / "config.json").read_bytes(), "README.md": b"# a branch\n"}
    hub.add_repo("org/poly", {name: present[name] for name in files}, revision="step1000")
    with pytest.raises(ExtractionError) as caught:
        open_hub_model("org/poly@step1000")
    assert caught.value.kind == "no weights" and "org/poly@step1000" in str(caught.value)


def test_a_hub_models_weights_sha256_is_the_hubs_digest_of_its_weight_files(hub, repos):
    import hashlib

    single = open_hub_model("tiny/bert")
    single.close()
    expected = hashlib.sha256((repos["tiny/bert"] / "model.safetensors").read_bytes()).hexdigest()
    assert single.weights_sha256 == expected
    folder = repos["tiny/llama-gqa-sharded"]
    shards = sorted(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values())
    lines = "".join(f"{name}:{hashlib.sha256((folder / name).read_bytes()).hexdigest()}\n" for name in set(shards))
    sharded = open_hub_model("tiny/llama-gqa-sharded")
    sharded.close()
    lines = "".join(sorted(lines.splitlines(keepends=True)))
    assert sharded.weights_sha256 == hashlib.sha256(lines.encode()).hexdigest()


@pytest.mark.parametrize("digest", ["AB" * 32, "ab" * 31, 7, "zz" * 32], ids=["upper", "short", "number", "not-hex"])
def test_a_model_info_whose_sha256_is_not_one_is_refused_in_one_line(digest):
    from attnstruct.checkpoints.extract.blocks import ExtractionError
    from attnstruct.checkpoints.hub_manifest import listing

    answer = {"sha": "a" * 40, "siblings": [{"rfilename": "model.safetensors", "lfs": {"size": 8, "sha256": digest}}]}
    with pytest.raises(ExtractionError, match="sha256 of model.safetensors") as caught:
        listing(answer, "the answer")
    assert "\n" not in str(caught.value)


def test_a_manifest_without_digests_is_refreshed_once(hub, tmp_path):
    first = open_hub_model("tiny/bert")
    first.close()
    (manifest,) = (tmp_path / "attnstruct-cache").rglob("tiny--bert/manifests/*.json")
    kept = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({"files": kept["files"], "sizes": kept["sizes"]}))  # as an older run kept it
    hub.reset_counters()
    again = open_hub_model("tiny/bert")
    again.close()
    assert again.weights_sha256 == first.weights_sha256
    assert len([p for _, p, _ in hub.requests if p.startswith("/api/")]) == 1
    assert json.loads(manifest.read_text())["sha256"] == kept["sha256"]


def test_a_re_uploaded_branch_is_read_again_with_refresh_and_not_without(hub, repos):
    """Weights uploaded again into the same branch (EleutherAI/pythia#107): the first run's pin holds until
    ``refresh``, which asks the hub once and pins the branch's new commit."""
    before = hub.add_repo("org/run", _config_and_weights(repos["tiny/bert"]), revision="step10")
    open_hub_model("org/run@step10").close()
    after = hub.add_repo("org/run", _config_and_weights(repos["tiny/wide-vocab"]), revision="step10")
    hub.reset_counters()
    pinned = open_hub_model("org/run@step10")
    pinned.close()
    assert pinned.commit == before and not [p for _, p, _ in hub.requests if p.startswith("/api/")]
    refreshed = open_hub_model("org/run@step10", refresh=True)
    refreshed.close()
    assert refreshed.commit == after != before
    assert len([p for _, p, _ in hub.requests if p.startswith("/api/")]) == 1
    hub.reset_counters()
    later = open_hub_model("org/run@step10")
    later.close()
    assert later.commit == after and not [p for _, p, _ in hub.requests if p.startswith("/api/")]


def test_score_with_refresh_scores_the_commit_a_branch_names_now(hub, repos, capsys):
    hub.add_repo("org/run", _config_and_weights(repos["tiny/bert"]), revision="step10")
    assert cli.main(["score", "org/run@step10"]) == 0
    first = capsys.readouterr().out
    hub.add_repo("org/run", _config_and_weights(repos["tiny/gpt2"]), revision="step10")
    assert cli.main(["score", "org/run@step10"]) == 0 and capsys.readouterr().out == first
    assert cli.main(["score", "org/run@step10", "--refresh"]) == 0
    assert (
        capsys.readouterr().out
        == score_model(repos["tiny/gpt2"])[["stack", "layer", "symmetry", "directionality"]].to_string(
            index=False, float_format=lambda v: f"{v:+.4f}"
        )
        + "\n"
    )


def _pythia_160m_shaped() -> dict:
    """A GPT-NeoX checkpoint of Pythia-160m's shape (12 layers, width 768, 12 heads, fp16, a fused per-head QKV weight
    and bias) as one ``model.safetensors``, only its query/key/value tensors stored (zeros elsewhere), and its
    config."""
    import numpy as np
    from standin_hub import sparse_safetensors

    d, layers, vocab, mlp = 768, 12, 50304, 3072
    tensors = {"gpt_neox.embed_in.weight": ("F16", [vocab, d]), "embed_out.weight": ("F16", [vocab, d])}
    tensors |= {f"gpt_neox.final_layer_norm.{p}": ("F16", [d]) for p in ("weight", "bias")}
    rng, stored = np.random.default_rng(0), {}
    for i in range(layers):
        layer = f"gpt_neox.layers.{i}"
        shapes = {
            "attention.query_key_value.weight": [3 * d, d],
            "attention.query_key_value.bias": [3 * d],
            "attention.dense.weight": [d, d],
            "attention.dense.bias": [d],
            "mlp.dense_h_to_4h.weight": [mlp, d],
            "mlp.dense_h_to_4h.bias": [mlp],
            "mlp.dense_4h_to_h.weight": [d, mlp],
            "mlp.dense_4h_to_h.bias": [d],
            **{
                f"{norm}.{p}": [d]
                for norm in ("input_layernorm", "post_attention_layernorm")
                for p in ("weight", "bias")
            },
        }
        tensors |= {f"{layer}.{name}": ("F16", shape) for name, shape in shapes.items()}
        for name in ("attention.query_key_value.weight", "attention.query_key_value.bias"):
            stored[f"{layer}.{name}"] = rng.standard_normal(shapes[name]).astype(np.float16).tobytes()
    config = {
        "architectures": ["GPTNeoXForCausalLM"],
        "model_type": "gpt_neox",
        "hidden_size": d,
        "num_hidden_layers": layers,
        "num_attention_heads": 12,
        "intermediate_size": mlp,
        "vocab_size": vocab,
        "rotary_pct": 0.25,
        "max_position_embeddings": 2048,
        "use_parallel_residual": True,
        "attention_bias": True,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    return {"config.json": json.dumps(config).encode(), "model.safetensors": sparse_safetensors(tensors, stored)}


def test_a_pythia_shaped_checkpoint_costs_at_most_8_resolver_calls_and_one_api_call(hub):
    """The hub meters every /resolve/ URL (https://huggingface.co/docs/hub/rate-limits): each file is resolved once and
    its ranges read through the signed CDN link it was redirected to, a layer's fused QKV rows in one range."""
    hub.add_repo("bench/pythia-160m", _pythia_160m_shaped(), revision="step1000")
    hub.redirect_large(0)
    hub.sign_links(3600)
    hub.reset_counters()
    table = score_model("bench/pythia-160m@step1000")
    assert len(table) == 12 and table["symmetry"].notna().all()
    assert hub.calls("resolvers") <= 8 and hub.calls("api") == 1
    assert hub.calls("cdn") <= 2 + 12 + 2  # the header's length and the header, then about one range a layer
