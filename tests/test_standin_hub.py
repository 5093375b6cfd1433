"""The stand-in Hub (tests/standin_hub.py) speaks the protocol huggingface_hub 2.4 expects. Offline: 127.0.0.1 only."""

import hashlib
import json
import struct
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import numpy as np
import pytest
import safetensors.torch
import torch
from huggingface_hub import HfApi, constants, get_session, hf_hub_download, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, parse_ratelimit_headers
from standin_hub import SparseFile, StandinHub, sparse_safetensors

pytestmark = pytest.mark.hub

REPO = "org/tiny"
CONFIG = json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}).encode()
WEIGHTS = bytes(np.arange(5000, dtype=np.uint8) * 7)


@pytest.fixture(autouse=True)
def _online_without_token(monkeypatch):
    """No stored token leaks into requests, and an HF_HUB_OFFLINE=1 shell does not make every test fail."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture
def hub(loopback_http):
    with StandinHub() as h:
        yield h


def _get(hub, repo, filename, revision, range_=None, token=False):
    """A raw read the way the project does it: get_session().get on hf_hub_url, with hf_raise_for_status."""
    headers = build_hf_headers(token=token)
    if range_ is not None:
        headers["Range"] = range_
    response = get_session().get(hf_hub_url(repo, filename, revision=revision, endpoint=hub.url), headers=headers)
    hf_raise_for_status(response)
    return response


def test_model_info_returns_commit_and_files(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": WEIGHTS})
    api = HfApi(endpoint=hub.url, token=False)
    info = api.model_info(REPO, revision="main")
    assert (info.id, info.sha, info.gated, info.private) == (REPO, commit, False, False)
    assert len(commit) == 40 and int(commit, 16) >= 0
    assert sorted(s.rfilename for s in info.siblings) == ["config.json", "model.safetensors"]
    assert info.config["model_type"] == "gpt2"
    assert ("GET", f"/api/models/{REPO}/revision/main", None) in hub.requests
    assert api.model_info(REPO, revision=commit).sha == commit  # a commit sha is a revision too
    assert api.model_info(REPO).sha == commit  # no revision: /api/models/{repo_id}, the default branch
    sizes = {s.rfilename: (s.size, s.lfs is not None) for s in api.model_info(REPO, files_metadata=True).siblings}
    assert sizes == {"config.json": (len(CONFIG), False), "model.safetensors": (len(WEIGHTS), True)}


def test_revisions_of_one_repo_are_separate_commits(hub):
    main = hub.add_repo(REPO, {"config.json": CONFIG})
    v2 = hub.add_repo(REPO, {"config.json": CONFIG, "extra.txt": b"x"}, revision="refs/pr/1")
    assert main != v2 and main == hub.add_repo(REPO, {"config.json": CONFIG})  # deterministic
    api = HfApi(endpoint=hub.url, token=False)
    assert api.model_info(REPO, revision="refs/pr/1").sha == v2  # quoted as refs%2Fpr%2F1
    assert [s.rfilename for s in api.model_info(REPO, revision=main).siblings] == ["config.json"]


def test_branches_and_tags_are_listed_as_list_repo_refs_reads_them(hub):
    hub.add_repo(REPO, {"config.json": CONFIG})
    tagged = hub.add_repo(REPO, {"config.json": CONFIG, "w.bin": b"1"}, revision="step100", tag=True)
    branch = hub.add_repo(REPO, {"config.json": CONFIG, "w.bin": b"2"}, revision="step200")
    refs = HfApi(endpoint=hub.url).list_repo_refs(REPO)
    assert {(r.name, r.ref, r.target_commit) for r in refs.tags} == {("step100", "refs/tags/step100", tagged)}
    assert {r.name for r in refs.branches} == {"main", "step200"}
    assert next(r.target_commit for r in refs.branches if r.name == "step200") == branch
    assert HfApi(endpoint=hub.url).model_info(REPO, revision="step100").sha == tagged


def test_add_folder_serves_every_file_under_it(hub, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "config.json").write_bytes(CONFIG)
    (tmp_path / "sub" / "w.bin").write_bytes(WEIGHTS)
    (tmp_path / ".hidden").write_bytes(b"x")
    commit = hub.add_folder(REPO, tmp_path, revision="v1")
    info = HfApi(endpoint=hub.url, token=False).model_info(REPO, revision="v1")
    assert info.sha == commit and sorted(s.rfilename for s in info.siblings) == ["config.json", "sub/w.bin"]
    assert _get(hub, REPO, "sub/w.bin", "v1", "bytes=1-2").content == WEIGHTS[1:3]


def test_hf_hub_download_then_cached_without_network(hub, tmp_path):
    commit = hub.add_repo(REPO, {"config.json": CONFIG})
    path = hf_hub_download(REPO, "config.json", endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert Path(path).read_bytes() == CONFIG
    assert [r[0] for r in hub.requests] == ["HEAD", "GET"]
    assert hub.requests[0][1] == f"/{REPO}/resolve/main/config.json"
    hub.stop()
    again = hf_hub_download(REPO, "config.json", revision=commit, endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert again == path and Path(again).read_bytes() == CONFIG
    with pytest.raises(httpx2.ConnectError):  # the server is really gone (hf_hub_download would retry for 23 s)
        _get(hub, REPO, "config.json", commit)


def test_offline_per_call_and_global(hub, tmp_path, monkeypatch):
    """Per call: local_files_only=True. Globally at run time: constants.HF_HUB_OFFLINE (read by is_offline_mode)."""
    hub.add_repo(REPO, {"config.json": CONFIG})
    kw = dict(endpoint=hub.url, cache_dir=tmp_path, token=False)
    with pytest.raises(LocalEntryNotFoundError):
        hf_hub_download(REPO, "config.json", local_files_only=True, **kw)
    path = hf_hub_download(REPO, "config.json", **kw)
    hub.reset_counters()
    assert hf_hub_download(REPO, "config.json", local_files_only=True, **kw) == path
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert hf_hub_download(REPO, "config.json", **kw) == path  # refs/main from the cache
    with pytest.raises(OfflineModeIsEnabled):
        _get(hub, REPO, "config.json", "main")
    assert hub.requests == []


def test_range_get_returns_the_bytes_and_counts_only_the_body(hub):
    commit = hub.add_repo(REPO, {"model.safetensors": WEIGHTS})
    hub.reset_counters()
    r = _get(hub, REPO, "model.safetensors", commit, "bytes=100-199")
    assert r.status_code == 206 and r.content == WEIGHTS[100:200]
    assert r.headers["Content-Range"] == f"bytes 100-199/{len(WEIGHTS)}" and r.headers["X-Repo-Commit"] == commit
    assert hub.bytes_served == 100 and hub.bytes_served_for(REPO) == 100 and hub.bytes_served_for("org/x") == 0
    assert hub.requests == [("GET", f"/{REPO}/resolve/{commit}/model.safetensors", "bytes=100-199")]
    whole = _get(hub, REPO, "model.safetensors", commit)
    assert whole.status_code == 200 and whole.content == WEIGHTS and hub.bytes_served == 100 + len(WEIGHTS)


def test_range_past_the_end_is_clipped_or_416(hub):
    commit = hub.add_repo(REPO, {"w.bin": WEIGHTS})
    n = len(WEIGHTS)
    r = _get(hub, REPO, "w.bin", commit, f"bytes={n - 10}-{n + 100}")
    assert r.status_code == 206 and r.content == WEIGHTS[-10:]
    assert r.headers["Content-Range"] == f"bytes {n - 10}-{n - 1}/{n}"
    assert _get(hub, REPO, "w.bin", commit, "bytes=-5").content == WEIGHTS[-5:]
    assert _get(hub, REPO, "w.bin", commit, "bytes=4990-").content == WEIGHTS[4990:]
    with pytest.raises(HfHubHTTPError) as err:
        _get(hub, REPO, "w.bin", commit, f"bytes={n}-{n + 10}")
    assert err.value.response.status_code == 416 and err.value.response.headers["Content-Range"] == f"bytes */{n}"


def test_sparse_file_ranges_across_segments(hub):
    sparse = SparseFile(100, {10: b"abcde", 15: b"XY", 90: b"0123456789"})
    dense = bytearray(100)
    dense[10:17], dense[90:100] = b"abcdeXY", b"0123456789"
    for start, end in [(0, 100), (12, 16), (14, 92), (16, 20), (0, 10), (95, 200), (50, 50)]:
        assert sparse.read(start, end) == bytes(dense[start:end]), (start, end)
    with pytest.raises(ValueError):
        SparseFile(20, {0: b"abc", 2: b"x"})  # overlapping segments
    commit = hub.add_repo(REPO, {"big.safetensors": sparse})
    assert _get(hub, REPO, "big.safetensors", commit, "bytes=8-91").content == bytes(dense[8:92])


def test_unknown_repo_raises_repository_not_found(hub):
    with pytest.raises(RepositoryNotFoundError) as err:
        HfApi(endpoint=hub.url, token=False).model_info("org/none")
    assert not isinstance(err.value, GatedRepoError) and err.value.response.status_code == 401  # anonymous
    with pytest.raises(RepositoryNotFoundError) as err:
        _get(hub, "org/none", "config.json", "main", token="hf_some_token")
    assert not isinstance(err.value, GatedRepoError) and err.value.response.status_code == 404  # authenticated


def test_unknown_file_raises_entry_not_found(hub, tmp_path):
    hub.add_repo(REPO, {"config.json": CONFIG})
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(REPO, "missing.json", endpoint=hub.url, cache_dir=tmp_path, token=False)
    with pytest.raises(RemoteEntryNotFoundError):
        _get(hub, REPO, "missing.json", "main", "bytes=0-7")


def test_unknown_revision_raises_revision_not_found(hub, tmp_path):
    hub.add_repo(REPO, {"config.json": CONFIG})
    with pytest.raises(RevisionNotFoundError):
        HfApi(endpoint=hub.url, token=False).model_info(REPO, revision="v9")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(REPO, "config.json", revision="0" * 40, endpoint=hub.url, cache_dir=tmp_path, token=False)


def test_gated_repo_needs_its_token(hub, tmp_path):
    """The files are gated (401 anonymous, 403 wrong token); model_info is public, as on the real Hub."""
    commit = hub.add_repo(REPO, {"config.json": CONFIG}, gated_token="hf_right")
    assert HfApi(endpoint=hub.url, token=False).model_info(REPO).gated == "manual"
    with pytest.raises(GatedRepoError) as err:
        hf_hub_download(REPO, "config.json", endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert err.value.response.status_code == 401 and err.value.response.headers["X-Error-Message"]
    with pytest.raises(GatedRepoError) as err:
        _get(hub, REPO, "config.json", commit, "bytes=0-3", token="hf_wrong")
    assert err.value.response.status_code == 403
    assert _get(hub, REPO, "config.json", commit, "bytes=0-3", token="hf_right").content == CONFIG[:4]
    path = hf_hub_download(REPO, "config.json", endpoint=hub.url, cache_dir=tmp_path, token="hf_right")
    assert Path(path).read_bytes() == CONFIG


def test_truncate_makes_a_ranged_read_fail(hub):
    """A cut transfer is an error, not a short body: get_session().get raises httpx2.RemoteProtocolError ("peer closed
    connection without sending complete message body (received 100 bytes, expected 1000)"), before any
    hf_raise_for_status. (hf_hub_download retries 5 times, 1 s apart, and raises the same error: it reads in 10 MB
    chunks, so a cut below 10 MB loses the partial chunk and the resume never advances.)"""
    commit = hub.add_repo(REPO, {"w.bin": WEIGHTS})
    hub.truncate(REPO, "w.bin", keep=100)
    hub.reset_counters()
    with pytest.raises(httpx2.RemoteProtocolError, match="received 100 bytes, expected 1000"):
        _get(hub, REPO, "w.bin", commit, "bytes=0-999")
    assert hub.bytes_served == 100
    assert _get(hub, REPO, "w.bin", commit, "bytes=0-49").content == WEIGHTS[:50]  # shorter than keep: intact
    hub.truncate(REPO, "w.bin", None)
    assert _get(hub, REPO, "w.bin", commit, "bytes=0-999").content == WEIGHTS[:1000]


def test_sparse_safetensors_is_what_safetensors_writes():
    q = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    k = torch.linspace(-1, 1, 6, dtype=torch.bfloat16).reshape(2, 3)
    spec = {"l0.q.weight": ("F32", [3, 4]), "l0.k.weight": ("BF16", [2, 3]), "l0.mlp.weight": ("F16", [5, 3])}
    stored = {"l0.q.weight": q.numpy().tobytes(), "l0.k.weight": k.view(torch.int16).numpy().tobytes()}
    sparse = sparse_safetensors(spec, stored)
    data = sparse.read()
    loaded = safetensors.torch.load(data)
    assert torch.equal(loaded["l0.q.weight"], q) and torch.equal(loaded["l0.k.weight"], k)
    assert loaded["l0.mlp.weight"].dtype == torch.float16 and not loaded["l0.mlp.weight"].any()
    reference = {"l0.q.weight": q, "l0.k.weight": k, "l0.mlp.weight": torch.zeros(5, 3, dtype=torch.float16)}
    assert data == safetensors.torch.save(reference, metadata={"format": "pt"})
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0


def test_seven_billion_shaped_checkpoint_is_served_by_ranges(hub):
    """A 7B-shaped sparse checkpoint (~13 GB announced) costs only its stored bytes; its header comes over HTTP."""
    d, layers = 4096, 32
    attn = {f"model.layers.{i}.self_attn.{m}_proj.weight": [d, d] for i in range(layers) for m in "qkvo"}
    mlp = {f"model.layers.{i}.mlp.{m}_proj.weight": [11008, d] for i in range(layers) for m in ("gate", "up", "down")}
    spec = {name: ("BF16", shape) for name, shape in {**attn, **mlp}.items()}
    spec |= {"model.embed_tokens.weight": ("BF16", [32000, d]), "lm_head.weight": ("BF16", [32000, d])}
    q5 = (np.arange(d * d, dtype=np.uint16) % 977).tobytes()
    sparse = sparse_safetensors(spec, {"model.layers.5.self_attn.q_proj.weight": q5})
    assert sparse.size > 13 * 10**9  # 6.7e9 bf16 parameters
    commit = hub.add_repo(REPO, {"model.safetensors": sparse})
    (n,) = struct.unpack("<Q", _get(hub, REPO, "model.safetensors", commit, "bytes=0-7").content)
    header = json.loads(_get(hub, REPO, "model.safetensors", commit, f"bytes=8-{8 + n - 1}").content)
    begin, end = header["model.layers.5.self_attn.q_proj.weight"]["data_offsets"]
    row = _get(hub, REPO, "model.safetensors", commit, f"bytes={8 + n + begin}-{8 + n + begin + 2 * d - 1}").content
    assert row == q5[: 2 * d]
    zeros = _get(hub, REPO, "model.safetensors", commit, f"bytes={8 + n + begin - 16}-{8 + n + begin - 1}").content
    assert zeros == bytes(16)


def _raw(url, range_=None, token=False, **kw):
    """One request, no redirect followed, no status check."""
    headers = build_hf_headers(token=token)
    if range_ is not None:
        headers["Range"] = range_
    return get_session().get(url, headers=headers, follow_redirects=False, **kw)


def test_large_files_redirect_to_a_cdn_on_another_origin(hub, tmp_path):
    commit = hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": WEIGHTS})
    hub.redirect_large(min_size=1000)
    url = hf_hub_url(REPO, "model.safetensors", revision=commit, endpoint=hub.url)
    for method in ("HEAD", "GET"):
        r = get_session().request(method, url, headers=build_hf_headers(token=False), follow_redirects=False)
        assert r.status_code == 302 and r.headers["Location"].startswith(f"{hub.cdn_url}/cdn/{REPO}/{commit}/")
        assert r.headers["X-Linked-Size"] == str(len(WEIGHTS)) and r.headers["X-Repo-Commit"] == commit
        assert r.headers["X-Linked-Etag"] == f'"{hashlib.sha256(WEIGHTS).hexdigest()}"' and r.headers["ETag"]
    assert urlsplit(hub.cdn_url).port != urlsplit(hub.url).port  # another origin
    cdn = _raw(r.headers["Location"], "bytes=10-19")
    assert cdn.status_code == 206 and cdn.content == WEIGHTS[10:20] and "X-Repo-Commit" not in cdn.headers
    _raw(r.headers["Location"], token="hf_sent_anyway")
    location = urlsplit(r.headers["Location"]).path
    assert hub.cdn_requests == [("GET", location, "bytes=10-19", False), ("GET", location, None, True)]
    assert _raw(hf_hub_url(REPO, "config.json", endpoint=hub.url)).status_code == 200  # not LFS: served directly
    hub.reset_counters()
    path = hf_hub_download(REPO, "model.safetensors", endpoint=hub.url, cache_dir=tmp_path, token="hf_some_token")
    assert Path(path).read_bytes() == WEIGHTS
    assert [(m, p) for m, p, _ in hub.requests] == [("HEAD", f"/{REPO}/resolve/main/model.safetensors")]
    assert hub.cdn_requests == [("GET", location, None, False)]  # the token stayed on the hub
    assert hub.bytes_served_for(REPO) == len(WEIGHTS)
    hub.redirect_large(None)
    assert _raw(url).status_code == 200


def test_a_renamed_repository_answers_307_with_a_relative_location(hub, tmp_path):
    hub.add_repo(REPO, {"config.json": CONFIG})
    hub.redirect_repo("org/old", REPO)
    r = _raw(hf_hub_url("org/old", "config.json", endpoint=hub.url))
    assert r.status_code == 307 and r.headers["Location"] == f"/{REPO}/resolve/main/config.json"
    assert HfApi(endpoint=hub.url, token=False).model_info("org/old").id == REPO
    path = hf_hub_download("org/old", "config.json", endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert Path(path).read_bytes() == CONFIG
    hub.redirect_repo("org/old", None)
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub.url, token=False).model_info("org/old")


def test_rate_limit_answers_every_kth_request_to_the_hub_with_429(hub):
    commit = hub.add_repo(REPO, {"model.safetensors": WEIGHTS})
    url = hf_hub_url(REPO, "model.safetensors", revision=commit, endpoint=hub.url)
    hub.redirect_large()
    hub.rate_limit(every=3, retry_after=7)
    for _ in range(6):
        r = _raw(url, "bytes=0-9")
        if r.status_code == 302:
            assert _raw(r.headers["Location"], "bytes=0-9").content == WEIGHTS[:10]  # the CDN is not counted
    assert hub.statuses == [302, 302, 429, 302, 302, 429] and len(hub.cdn_requests) == 4
    assert hub.faults == [("rate limited", urlsplit(url).path)] * 2
    assert r.headers["Retry-After"] == "7" and r.headers["X-Error-Message"] and "RateLimit" not in r.headers
    with pytest.raises(HfHubHTTPError) as err:
        hf_raise_for_status(r)
    assert err.value.response.status_code == 429
    hub.rate_limit(every=1, reset=30)
    r = _raw(f"{hub.url}/api/models/{REPO}")
    assert r.status_code == 429 and "Retry-After" not in r.headers
    limit = parse_ratelimit_headers(r.headers)
    assert (limit.remaining, limit.reset_in_seconds) == (0, 30)
    hub.rate_limit(every=1, path="/resolve/")
    assert _raw(f"{hub.url}/api/models/{REPO}").status_code == 200 and _raw(url).status_code == 429
    hub.rate_limit(None)
    assert _raw(url).status_code == 302


def test_fail_once_answers_the_next_matching_request_with_a_5xx(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG, "w.bin": WEIGHTS})
    url = hf_hub_url(REPO, "w.bin", revision=commit, endpoint=hub.url)
    hub.fail_once("w.bin")
    hub.fail_once("w.bin", 502, method="GET")
    assert _raw(hf_hub_url(REPO, "config.json", endpoint=hub.url)).status_code == 200  # does not match
    assert _raw(url).status_code == 503
    assert get_session().head(url).status_code == 200  # the 502 waits for a GET
    assert [_raw(url).status_code for _ in range(2)] == [502, 200]
    assert [fault for fault, _ in hub.faults] == ["failed", "failed"]


def test_break_once_cuts_one_transfer_short_on_either_origin(hub):
    commit = hub.add_repo(REPO, {"w.bin": WEIGHTS})
    url = hf_hub_url(REPO, "w.bin", revision=commit, endpoint=hub.url)
    hub.break_once("w.bin")
    with pytest.raises(httpx2.RemoteProtocolError, match="received 500 bytes, expected 1000"):
        _raw(url, "bytes=0-999")
    assert _raw(url, "bytes=0-999").content == WEIGHTS[:1000]  # once
    hub.redirect_large()
    hub.break_once("w.bin", keep=10)
    location = _raw(url, "bytes=0-99").headers["Location"]
    with pytest.raises(httpx2.RemoteProtocolError, match="received 10 bytes, expected 100"):
        _raw(location, "bytes=0-99")
    assert hub.faults == [("broken", urlsplit(url).path), ("broken", urlsplit(location).path)]


def test_stall_once_answers_late_once(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG})
    url = hf_hub_url(REPO, "config.json", revision=commit, endpoint=hub.url)
    hub.stall_once("config.json", 0.3)
    with pytest.raises(httpx2.ReadTimeout):
        _raw(url, timeout=0.05)
    assert _raw(url, timeout=5).content == CONFIG and [fault for fault, _ in hub.faults] == ["stalled"]


# -- dataset repositories --------------------------------------------------------------------------------------------

DATASET_ID = "org/prose"
DATASET_FILES = {
    "README.md": b"---\nconfigs:\n- config_name: en\n  data_files: en/*.parquet\n---\n# prose\n",
    "en/train-00000-of-00002.parquet": bytes(range(256)) * 50,
    "en/train-00001-of-00002.parquet": bytes(range(256)) * 40,
    "fr/notes/readme.txt": b"bonjour",
}


def test_dataset_info_returns_its_commit_and_says_whether_it_is_gated(hub):
    commit = hub.add_dataset(DATASET_ID, DATASET_FILES)
    hub.add_dataset("org/closed", {"a.txt": b"x"}, gated_token="hf_secret")
    api = HfApi(endpoint=hub.url, token=False)
    info = api.dataset_info(DATASET_ID, revision="main")
    assert info.id == DATASET_ID and info.sha == commit and not info.gated
    assert sorted(s.rfilename for s in info.siblings) == sorted(DATASET_FILES)
    assert api.dataset_info("org/closed").gated == "manual"
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info("org/missing")
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(DATASET_ID, revision="v9")
    with pytest.raises(RepositoryNotFoundError):  # a model of that id does not exist
        api.model_info(DATASET_ID)


def test_a_dataset_tree_lists_files_with_sizes_and_folders_recursively_or_not(hub):
    hub.add_dataset(DATASET_ID, DATASET_FILES)
    api = HfApi(endpoint=hub.url, token=False)
    listed = list(api.list_repo_tree(DATASET_ID, recursive=True, repo_type="dataset"))
    files = {e.path: e.size for e in listed if hasattr(e, "size")}
    assert files == {name: len(content) for name, content in DATASET_FILES.items()}
    assert {e.path for e in listed if not hasattr(e, "size")} == {"en", "fr", "fr/notes"}
    assert all(e.lfs is not None for e in listed if e.path.endswith(".parquet"))
    top = {e.path for e in api.list_repo_tree(DATASET_ID, repo_type="dataset")}
    assert top == {"README.md", "en", "fr"}
    inner = {e.path for e in api.list_repo_tree(DATASET_ID, path_in_repo="en", repo_type="dataset")}
    assert inner == {"en/train-00000-of-00002.parquet", "en/train-00001-of-00002.parquet"}
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(DATASET_ID, path_in_repo="de", repo_type="dataset"))


def test_a_long_tree_comes_in_pages_linked_by_the_next_header(hub):
    hub.add_dataset(DATASET_ID, {f"data/part-{i:03d}.jsonl": b"{}\n" for i in range(7)})
    hub.tree_page_size = 3
    api = HfApi(endpoint=hub.url, token=False)
    listed = [e.path for e in api.list_repo_tree(DATASET_ID, recursive=True, repo_type="dataset")]
    assert listed == ["data"] + [f"data/part-{i:03d}.jsonl" for i in range(7)]
    pages = [path for _, path, _ in hub.requests if "/tree/" in path]
    assert len(pages) == 3 and all("cursor=" in path for path in pages[1:])


def test_dataset_files_download_and_read_by_range_through_the_cdn_without_the_token(hub, tmp_path):
    commit = hub.add_dataset(DATASET_ID, DATASET_FILES, gated_token="hf_secret")
    hub.redirect_large(0)
    name = "en/train-00000-of-00002.parquet"
    with pytest.raises(GatedRepoError):
        hf_hub_download(DATASET_ID, name, repo_type="dataset", cache_dir=tmp_path, endpoint=hub.url, token=False)
    path = hf_hub_download(
        DATASET_ID, name, repo_type="dataset", cache_dir=tmp_path, endpoint=hub.url, token="hf_secret"
    )
    assert Path(path).read_bytes() == DATASET_FILES[name] and commit in path
    url = hf_hub_url(DATASET_ID, name, repo_type="dataset", revision=commit, endpoint=hub.url)
    assert url.startswith(f"{hub.url}/datasets/{DATASET_ID}/resolve/")
    headers = {**build_hf_headers(token="hf_secret"), "Range": "bytes=10-19"}
    response = get_session().get(url, headers=headers, follow_redirects=True)
    hf_raise_for_status(response)
    assert response.status_code == 206 and response.content == DATASET_FILES[name][10:20]
    assert all(path.startswith(f"/cdn/datasets/{DATASET_ID}/") and not auth for _, path, _, auth in hub.cdn_requests)
    assert hub.bytes_served_for(DATASET_ID, name) == len(DATASET_FILES[name]) + 10


def _dataset_url(hub, name, revision="main", repo=DATASET_ID):
    return hf_hub_url(repo, name, repo_type="dataset", revision=revision, endpoint=hub.url)


def test_dataset_files_answer_the_hubs_typed_errors(hub, tmp_path):
    hub.add_dataset(DATASET_ID, DATASET_FILES)
    hub.add_dataset("org/closed", DATASET_FILES, gated_token="hf_secret")

    def download(repo, name, revision=None, token=False):
        kw = dict(repo_type="dataset", revision=revision, cache_dir=tmp_path, endpoint=hub.url, token=token)
        return hf_hub_download(repo, name, **kw)

    with pytest.raises(RemoteEntryNotFoundError):
        download(DATASET_ID, "en/missing.parquet")
    with pytest.raises(RevisionNotFoundError):
        download(DATASET_ID, "README.md", revision="v9")
    with pytest.raises(RepositoryNotFoundError) as err:
        download("org/missing", "README.md")
    assert not isinstance(err.value, GatedRepoError)
    with pytest.raises(RepositoryNotFoundError):  # a model of that id does not exist
        hf_hub_download(DATASET_ID, "README.md", cache_dir=tmp_path, endpoint=hub.url, token=False)
    statuses = []
    for token in (False, "hf_other"):
        with pytest.raises(GatedRepoError) as err:
            download("org/closed", "README.md", token=token)
        statuses.append(err.value.response.status_code)
    assert statuses == [401, 403]
    assert Path(download("org/closed", "README.md", token="hf_secret")).read_bytes() == DATASET_FILES["README.md"]


def test_dataset_ranges_are_clipped_or_416_as_for_a_model(hub):
    commit = hub.add_dataset(DATASET_ID, DATASET_FILES)
    name = "en/train-00001-of-00002.parquet"
    data, url = DATASET_FILES[name], _dataset_url(hub, name, commit)
    head = get_session().head(url, headers=build_hf_headers(token=False))
    assert head.status_code == 200 and int(head.headers["Content-Length"]) == len(data)
    assert head.headers["X-Repo-Commit"] == commit
    assert head.headers["ETag"].strip('"') == hashlib.sha256(data).hexdigest()
    r = _raw(url, f"bytes={len(data) - 4}-{len(data) + 50}")
    assert r.status_code == 206 and r.content == data[-4:]
    assert r.headers["Content-Range"] == f"bytes {len(data) - 4}-{len(data) - 1}/{len(data)}"
    past = _raw(url, f"bytes={len(data)}-")
    assert past.status_code == 416 and past.headers["Content-Range"] == f"bytes */{len(data)}"


def test_the_faults_strike_dataset_files_too(hub):
    hub.add_dataset(DATASET_ID, DATASET_FILES)
    name = "en/train-00000-of-00002.parquet"
    url = _dataset_url(hub, name)
    hub.rate_limit(every=2, retry_after=4, path="/datasets/")
    first, second = _raw(url, "bytes=0-9"), _raw(url, "bytes=0-9")
    assert (first.status_code, second.status_code, second.headers["Retry-After"]) == (206, 429, "4")
    hub.rate_limit(None)
    hub.fail_once(name, 503)
    assert [_raw(url, "bytes=0-9").status_code for _ in range(2)] == [503, 206]
    hub.break_once(name)
    with pytest.raises(httpx2.RemoteProtocolError, match="received 50 bytes, expected 100"):
        _raw(url, "bytes=0-99")
    assert [fault for fault, _ in hub.faults] == ["rate limited", "failed", "broken"]


def test_truncate_cuts_a_dataset_file_short(hub):
    hub.add_dataset(DATASET_ID, DATASET_FILES)
    name = "en/train-00000-of-00002.parquet"
    hub.truncate(DATASET_ID, name, keep=30)
    with pytest.raises(httpx2.RemoteProtocolError, match="received 30 bytes, expected 100"):
        _raw(_dataset_url(hub, name), "bytes=0-99")
    with pytest.raises(KeyError):
        hub.truncate("org/missing", name, keep=30)


def test_requests_and_bytes_are_counted_per_repository_and_file_until_reset(hub):
    commit = hub.add_dataset(DATASET_ID, DATASET_FILES)
    hub.add_dataset("org/prose2", DATASET_FILES)
    hub.redirect_large(0)
    shards = sorted(name for name in DATASET_FILES if name.endswith(".parquet"))
    for name in shards:
        location = _raw(_dataset_url(hub, name, commit), "bytes=0-9").headers["Location"]
        assert _raw(location, "bytes=0-9").content == DATASET_FILES[name][:10]
    _raw(_dataset_url(hub, "README.md", commit))
    _raw(_dataset_url(hub, "README.md", repo="org/prose2"))
    HfApi(endpoint=hub.url, token=False).dataset_info(DATASET_ID)
    assert len(hub.requests_for(DATASET_ID)) == 2 * len(shards) + 2  # the CDN's requests too
    assert [path for _, path, _ in hub.requests_for(DATASET_ID, shards[0])] == [
        f"/datasets/{DATASET_ID}/resolve/{commit}/{shards[0]}",
        f"/cdn/datasets/{DATASET_ID}/{commit}/{shards[0]}",
    ]
    assert len(hub.requests_for(DATASET_ID, "README.md")) == 1 and len(hub.requests_for("org/prose2")) == 1
    assert hub.bytes_served_for(DATASET_ID, shards[1]) == 10
    assert hub.bytes_served_for(DATASET_ID) == 20 + len(DATASET_FILES["README.md"])
    hub.reset_counters()
    assert hub.requests_for(DATASET_ID) == [] and hub.bytes_served_for(DATASET_ID) == 0 and hub.bytes_served == 0


def test_paths_info_gives_the_entries_of_the_paths_that_exist(hub):
    commit = hub.add_dataset(DATASET_ID, DATASET_FILES)
    api = HfApi(endpoint=hub.url, token=False)
    name = "en/train-00000-of-00002.parquet"
    found = api.get_paths_info(DATASET_ID, [name, "fr/notes", "de", "README.md"], repo_type="dataset", revision=commit)
    assert [(type(e).__name__, e.path) for e in found] == [
        ("RepoFile", name),
        ("RepoFolder", "fr/notes"),
        ("RepoFile", "README.md"),
    ]
    assert found[0].size == len(DATASET_FILES[name]) and found[2].lfs is None
    assert found[0].lfs.sha256 == hashlib.sha256(DATASET_FILES[name]).hexdigest()
    hub.add_repo(REPO, {"config.json": CONFIG})
    assert [e.path for e in api.get_paths_info(REPO, "config.json")] == ["config.json"]
    with pytest.raises(RevisionNotFoundError):
        api.get_paths_info(DATASET_ID, "README.md", repo_type="dataset", revision="v9")
    # the POST bodies were read: the kept-alive connection answers the next request
    assert _raw(f"{hub.url}/api/datasets/{DATASET_ID}/tree/main").status_code == 200


def test_a_tree_listing_asked_to_expand_parses_as_one_that_is_not(hub):
    hub.add_dataset(DATASET_ID, DATASET_FILES)
    api = HfApi(endpoint=hub.url, token=False)
    plain = [(e.path, getattr(e, "size", None)) for e in api.list_repo_tree(DATASET_ID, repo_type="dataset")]
    expanded = api.list_repo_tree(DATASET_ID, repo_type="dataset", expand=True)
    assert [(e.path, getattr(e, "size", None)) for e in expanded] == plain
    assert any("expand=True" in path or "expand=true" in path for _, path, _ in hub.requests)


def test_a_tokenizer_repository_serves_its_tokenizer_json_to_hf_hub_download(hub, tmp_path):
    tokenizer = json.dumps({"version": "1.0", "model": {"type": "WordPiece", "vocab": {"[UNK]": 0}}}).encode()
    commit = hub.add_repo("org/tok", {"tokenizer.json": tokenizer})
    path = hf_hub_download("org/tok", "tokenizer.json", cache_dir=tmp_path, endpoint=hub.url, token=False)
    assert Path(path).read_bytes() == tokenizer and Path(path).parent.name == commit
    assert [method for method, _, _ in hub.requests_for("org/tok", "tokenizer.json")] == ["HEAD", "GET"]


def test_slow_down_delays_every_answer_or_those_to_some_paths(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG, "w.bin": WEIGHTS})

    def seconds(name):
        began = time.monotonic()
        assert _raw(hf_hub_url(REPO, name, revision=commit, endpoint=hub.url)).status_code == 200
        return time.monotonic() - began

    hub.slow_down(0.5, path="w.bin")
    assert seconds("w.bin") >= 0.5 and seconds("config.json") < 0.5
    hub.slow_down(0.5)
    assert seconds("config.json") >= 0.5
    hub.slow_down(0)
    assert seconds("w.bin") < 0.5


# -- misbehaviour (the hostile suite's) ------------------------------------------------------------------------------


def test_misreport_lies_about_the_commit_and_the_etag_in_the_hubs_own_shapes(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": WEIGHTS})
    hub.misreport(REPO, sha="../../../escape", etag="../../../../blob")
    info = HfApi(endpoint=hub.url, token=False).model_info(REPO)
    assert info.sha == "../../../escape" and {s.rfilename for s in info.siblings} == {
        "config.json",
        "model.safetensors",
    }
    refs = HfApi(endpoint=hub.url, token=False).list_repo_refs(REPO)
    assert [b.target_commit for b in refs.branches] == ["../../../escape"]
    r = _raw(hf_hub_url(REPO, "config.json", revision=commit, endpoint=hub.url))
    assert r.headers["ETag"] == '"../../../../blob"' and r.content == CONFIG
    hub.misreport(REPO)
    assert HfApi(endpoint=hub.url, token=False).model_info(REPO).sha == commit


def test_misreport_tells_a_datasets_lie_consistently_and_serves_its_files_under_it(hub):
    commit = hub.add_dataset(DATASET_ID, DATASET_FILES)
    hub.misreport(DATASET_ID, sha="../../../escape")
    api = HfApi(endpoint=hub.url, token=False)
    assert api.dataset_info(DATASET_ID).sha == "../../../escape"
    assert [b.target_commit for b in api.list_repo_refs(DATASET_ID, repo_type="dataset").branches] == [
        "../../../escape"
    ]
    listed = api.list_repo_tree(DATASET_ID, revision="../../../escape", recursive=True, repo_type="dataset")
    assert {e.path for e in listed if hasattr(e, "size")} == set(DATASET_FILES)
    url = hf_hub_url(DATASET_ID, "README.md", repo_type="dataset", revision="../../../escape", endpoint=hub.url)
    r = _raw(url)
    assert r.content == DATASET_FILES["README.md"] and r.headers["X-Repo-Commit"] == "../../../escape"
    hub.misreport(DATASET_ID)
    assert api.dataset_info(DATASET_ID).sha == commit
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(DATASET_ID, revision="../../../escape")


def test_mislink_tree_names_the_next_page_on_another_origin_or_after_every_page(hub):
    hub.add_dataset(DATASET_ID, DATASET_FILES)
    hub.tree_page_size = 3
    tree = f"{hub.url}/api/datasets/{DATASET_ID}/tree/main?recursive=true"
    assert "next" in _raw(tree).links and "next" not in _raw(f"{tree}&cursor=6").links  # 7 entries: 3 pages
    hub.mislink_tree(origin=hub.cdn_url)
    assert _raw(tree).links["next"]["url"].startswith(f"{hub.cdn_url}/api/datasets/{DATASET_ID}/tree/main?")
    hub.mislink_tree(endless=True)
    past = _raw(f"{tree}&cursor=300")
    following = past.links["next"]["url"]
    assert past.json() == [] and following.startswith(f"{hub.url}/") and "cursor=303" in following
    hub.mislink_tree()
    assert "next" not in _raw(f"{tree}&cursor=6").links


def test_trickle_sends_a_body_one_byte_at_a_time_and_headers_too_when_asked(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG})
    url = hf_hub_url(REPO, "config.json", revision=commit, endpoint=hub.url)
    hub.trickle(0.1, "config.json")
    with get_session().stream("GET", url, headers={"Range": "bytes=0-3"}, timeout=5) as r:
        began = time.monotonic()
        assert r.status_code == 206  # the headers came at once
        pieces = list(r.iter_raw())
    assert b"".join(pieces) == CONFIG[:4] and len(pieces) == 4 and time.monotonic() - began >= 0.3
    hub.trickle(0.1, "config.json", headers=True)
    with pytest.raises(httpx2.ReadTimeout):  # no header line is complete within 0.05 s
        _raw(url, timeout=0.05)
    hub.trickle(None)
    assert _raw(url, timeout=5).content == CONFIG


def test_ignore_ranges_answers_a_range_request_with_the_whole_file(hub):
    commit = hub.add_repo(REPO, {"w.bin": WEIGHTS, "big.bin": SparseFile(3 << 30, {0: b"head"})})
    url = hf_hub_url(REPO, "w.bin", revision=commit, endpoint=hub.url)
    hub.ignore_ranges("w.bin")
    r = _raw(url, "bytes=10-19")
    assert r.status_code == 200 and r.content == WEIGHTS and "Content-Range" not in r.headers
    big = hf_hub_url(REPO, "big.bin", revision=commit, endpoint=hub.url)
    with get_session().stream("GET", big, headers={"Range": "bytes=0-3"}) as r:
        assert r.status_code == 206  # only the paths asked for
    hub.ignore_ranges("")
    with get_session().stream("GET", big, headers={"Range": "bytes=0-3"}) as r:
        assert r.status_code == 200 and int(r.headers["Content-Length"]) == 3 << 30
        assert next(r.iter_raw()).startswith(b"head")
    hub.ignore_ranges(None)
    assert _raw(url, "bytes=10-19").content == WEIGHTS[10:20]


def test_a_ref_name_is_listed_as_added_even_one_no_git_would_allow(hub):
    hub.add_repo(REPO, {"config.json": CONFIG}, revision="step1\n/home/x/model")
    names = [b.name for b in HfApi(endpoint=hub.url, token=False).list_repo_refs(REPO).branches]
    assert names == ["step1\n/home/x/model"]


# -- the real hub's behaviour (tests/standin_realism.py) --------------------------------------------------------------

RANDOM = np.random.default_rng(0).bytes(300_000)  # incompressible: gzip does not shrink it


def _http(url, method="GET", **headers):
    """One plain request: the headers given and no others, no redirect followed, no status check."""
    return httpx2.request(method, url, headers=headers, follow_redirects=False, timeout=10)


def _resolve_url(hub, name, commit="main"):
    return f"{hub.url}/{REPO}/resolve/{commit}/{name}"


def test_quota_sends_ratelimit_on_every_answer_of_its_bucket_then_429_without_retry_after(hub):
    hub.add_repo(REPO, {"config.json": CONFIG})
    hub.quota("resolvers", 3, 2)
    answers = [_http(_resolve_url(hub, "config.json")) for _ in range(4)]
    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    assert [parse_ratelimit_headers(r.headers).remaining for r in answers] == [2, 1, 0, 0]
    assert all(r.headers["RateLimit-Policy"] == '"fixed window";"resolvers";q=3;w=2' for r in answers)
    assert all(r.headers["RateLimit"].startswith('"resolvers";') for r in answers)
    refused = answers[-1]
    assert "Retry-After" not in refused.headers and refused.json()["error"] == refused.headers["X-Error-Message"]
    assert _http(f"{hub.url}/api/models/{REPO}").headers.get("RateLimit") is None  # the api bucket has no quota


def test_quota_windows_are_fixed_and_t_is_the_seconds_left_rounded_down_or_up(hub):
    hub.add_repo(REPO, {"config.json": CONFIG})
    info = f"{hub.url}/api/models/{REPO}"
    began = time.monotonic()
    hub.quota("api", 1, 1)
    assert _http(info).status_code == 200
    refused = _http(info)
    assert refused.status_code == 429 and parse_ratelimit_headers(refused.headers).reset_in_seconds == 0  # floor
    time.sleep(max(0.0, began + 1.1 - time.monotonic()))
    assert _http(info).status_code == 200  # the next window
    hub.quota("api", 1, 1, rounding="ceil")
    _http(info)
    assert parse_ratelimit_headers(_http(info).headers).reset_in_seconds == 1


def test_quota_is_counted_per_token_else_per_client_address(hub):
    hub.add_repo(REPO, {"config.json": CONFIG})
    info = f"{hub.url}/api/models/{REPO}"
    hub.quota("api", 1, 2)
    assert [_http(info).status_code for _ in range(2)] == [200, 429]
    tokens = ["hf_a", "hf_b", "hf_a"]
    assert [_http(info, Authorization=f"Bearer {t}").status_code for t in tokens] == [200, 200, 429]


def test_quota_never_counts_the_cdn_and_a_limit_of_none_switches_it_off(hub):
    commit = hub.add_repo(REPO, {"model.safetensors": WEIGHTS})
    hub.redirect_large()
    hub.quota("resolvers", 1, 2)
    redirect = _http(_resolve_url(hub, "model.safetensors", commit))
    assert redirect.status_code == 302 and parse_ratelimit_headers(redirect.headers).remaining == 0
    cdn = [_http(redirect.headers["Location"], Range="bytes=0-9") for _ in range(3)]
    assert [r.status_code for r in cdn] == [206] * 3 and all("RateLimit" not in r.headers for r in cdn)
    assert _http(_resolve_url(hub, "model.safetensors", commit)).status_code == 429
    hub.quota("resolvers", None, 2)
    after = _http(_resolve_url(hub, "model.safetensors", commit))
    assert after.status_code == 302 and "RateLimit" not in after.headers


def test_calls_counts_each_bucket_with_or_without_a_quota_until_reset(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": WEIGHTS})
    hub.redirect_large()
    _http(f"{hub.url}/api/models/{REPO}")
    _http(f"{hub.url}/api/models/{REPO}/refs")
    location = _http(_resolve_url(hub, "model.safetensors", commit)).headers["Location"]
    _http(location, Range="bytes=0-1")
    _http(_resolve_url(hub, "config.json"))
    assert (hub.calls("api"), hub.calls("resolvers"), hub.calls("cdn")) == (2, 2, 1)
    hub.reset_counters()
    assert (hub.calls("api"), hub.calls("resolvers"), hub.calls("cdn")) == (0, 0, 0)


def test_latency_delays_every_request_on_each_origin_by_its_own_amount(hub):
    commit = hub.add_repo(REPO, {"model.safetensors": WEIGHTS})
    hub.redirect_large()
    hub.latency(0.3, cdn=0.0)
    began = time.monotonic()
    location = _http(_resolve_url(hub, "model.safetensors", commit)).headers["Location"]
    assert time.monotonic() - began >= 0.3
    began = time.monotonic()
    _http(location)
    assert time.monotonic() - began < 0.25
    hub.latency(0.0, cdn=0.3)
    began = time.monotonic()
    _http(location)
    assert time.monotonic() - began >= 0.3


def _signed(hub, ttl, xet=False):
    """The 302 of a signed link to WEIGHTS, and its query."""
    commit = hub.add_repo(REPO, {"model.safetensors": WEIGHTS})
    hub.redirect_large()
    hub.sign_links(ttl, xet=xet)
    redirect = _http(_resolve_url(hub, "model.safetensors", commit))
    return redirect, dict(part.split("=", 1) for part in urlsplit(redirect.headers["Location"]).query.split("&"))


def test_signed_links_carry_an_amz_query_and_are_served_while_fresh(hub):
    redirect, query = _signed(hub, 3600)
    assert redirect.headers["Location"].startswith(f"{hub.cdn_url}/cdn/{REPO}/")
    assert (query["X-Amz-Algorithm"], query["X-Amz-Expires"]) == ("AWS4-HMAC-SHA256", "3600")
    issued = time.mktime(time.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ")) - time.timezone  # UTC
    assert abs(issued - time.time()) < 5 and len(query["X-Amz-Signature"]) == 64
    served = _http(redirect.headers["Location"], Range="bytes=10-19")
    assert served.status_code == 206 and served.content == WEIGHTS[10:20]
    hub.sign_links(None)
    assert "?" not in _http(redirect.request.url).headers["Location"]


def test_a_signed_link_answers_403_request_has_expired_once_its_ttl_is_past(hub):
    redirect, query = _signed(hub, 0)  # valid within the second of X-Amz-Date
    time.sleep(1.02 - time.time() % 1)
    expired = _http(redirect.headers["Location"], Range="bytes=0-9")
    assert expired.status_code == 403 and expired.headers["Content-Type"] == "application/xml"
    assert b"<Code>AccessDenied</Code><Message>Request has expired</Message>" in expired.content


def test_a_signed_link_without_its_signature_or_with_a_wrong_one_answers_403(hub):
    redirect, query = _signed(hub, 3600)
    location = redirect.headers["Location"]
    assert _http(location.split("?")[0]).status_code == 403
    assert _http(location.replace(query["X-Amz-Expires"], "7200")).status_code == 403  # the signature no longer fits
    assert _http(location[:-1] + ("0" if location[-1] != "0" else "1")).status_code == 403


def test_a_signed_link_requested_with_authorization_answers_400(hub):
    redirect, _ = _signed(hub, 3600)
    refused = _http(redirect.headers["Location"], Authorization="Bearer hf_token")
    assert refused.status_code == 400 and b"<Code>InvalidArgument</Code>" in refused.content
    assert b"Only one auth mechanism allowed" in refused.content


def test_xet_links_carry_the_xet_headers_and_the_read_token_route_fails(hub):
    from huggingface_hub.utils._xet import parse_xet_file_data_from_response

    redirect, _ = _signed(hub, 3600, xet=True)
    commit = redirect.headers["X-Repo-Commit"]
    route = f"{hub.url}/api/models/{REPO}/xet-read-token/{commit}"
    assert redirect.headers["X-Xet-Refresh-Route"] == route and redirect.headers["Link"] == f'<{route}>; rel="xet-auth"'
    assert redirect.headers["X-Linked-Size"] == str(len(WEIGHTS)) and redirect.headers["X-Linked-Etag"]
    xet = parse_xet_file_data_from_response(redirect, endpoint=hub.url)
    assert xet is not None and xet.refresh_route == route and len(xet.file_hash) == 64
    assert _http(route).status_code == 500
    hub.sign_links(3600)
    assert "X-Xet-Hash" not in _http(redirect.request.url).headers and _http(route).status_code == 404


def test_cdn_gzip_ignores_range_and_sends_the_whole_file_gzipped_and_chunked(hub):
    commit = hub.add_repo(REPO, {"model.safetensors": RANDOM})
    hub.redirect_large()
    hub.cdn_gzip()
    location = _http(_resolve_url(hub, "model.safetensors", commit)).headers["Location"]
    hub.reset_counters()
    answer = _http(location, Range="bytes=0-7", **{"Accept-Encoding": "gzip, deflate"})
    assert answer.status_code == 200 and answer.content == RANDOM  # httpx2 decodes the gzip
    assert answer.headers["Content-Encoding"] == "gzip" and answer.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in answer.headers
    assert hub.bytes_served_for(REPO) > len(RANDOM)  # the whole file, compressed: no smaller


def test_cdn_gzip_honours_range_when_the_request_accepts_only_identity(hub):
    commit = hub.add_repo(REPO, {"model.safetensors": RANDOM})
    hub.redirect_large()
    hub.cdn_gzip()
    location = _http(_resolve_url(hub, "model.safetensors", commit)).headers["Location"]
    hub.reset_counters()
    answer = _http(location, Range="bytes=0-7", **{"Accept-Encoding": "identity"})
    assert answer.status_code == 206 and answer.content == RANDOM[:8] and hub.bytes_served_for(REPO) == 8
    hub.cdn_gzip(False)
    assert _http(location, Range="bytes=0-7", **{"Accept-Encoding": "gzip"}).status_code == 206


def test_bogus_416_answers_every_kth_ranged_get_though_the_range_is_valid(hub):
    commit = hub.add_repo(REPO, {"w.bin": WEIGHTS, "config.json": CONFIG})
    hub.bogus_416(2, path="w.bin")
    url = _resolve_url(hub, "w.bin", commit)
    answers = [_http(url, Range="bytes=0-9") for _ in range(4)]
    assert [r.status_code for r in answers] == [206, 416, 206, 416]
    assert answers[1].headers["Content-Range"] == "bytes */177"
    assert answers[1].headers["x-cache"] == "Error from cloudfront"
    assert (
        _http(url).status_code == 200 and _http(_resolve_url(hub, "config.json"), Range="bytes=0-1").status_code == 206
    )
    hub.bogus_416(None)
    assert [_http(url, Range="bytes=0-9").status_code for _ in range(2)] == [206, 206]


def test_bogus_416_once_strikes_the_next_ranged_get_on_either_origin_once(hub):
    commit = hub.add_repo(REPO, {"model.safetensors": WEIGHTS})
    hub.redirect_large()
    location = _http(_resolve_url(hub, "model.safetensors", commit)).headers["Location"]
    hub.bogus_416_once("/cdn/")
    assert [_http(location, Range="bytes=0-9").status_code for _ in range(2)] == [416, 206]
    assert hub.faults == [("bogus 416", urlsplit(location).path)]


def test_an_unknown_token_gets_401_invalid_credentials_even_on_a_public_repository(hub):
    hub.add_repo(REPO, {"config.json": CONFIG})
    hub.known_tokens({"hf_good"})
    for url in (f"{hub.url}/api/models/{REPO}", _resolve_url(hub, "config.json"), f"{hub.url}/api/models/{REPO}/refs"):
        refused = _http(url, Authorization="Bearer hf_stale")
        assert refused.status_code == 401
        assert refused.headers["X-Error-Message"] == "Invalid credentials in Authorization header"
        assert refused.json() == {"error": "Invalid credentials in Authorization header"}
    with pytest.raises(HfHubHTTPError) as err:
        HfApi(endpoint=hub.url, token="hf_stale").model_info(REPO)
    assert not isinstance(err.value, RepositoryNotFoundError)  # hf_raise_for_status special-cases the message
    assert _http(_resolve_url(hub, "config.json")).status_code == 200  # no token: unaffected
    assert _http(_resolve_url(hub, "config.json"), Authorization="Bearer hf_good").status_code == 200
    hub.known_tokens(None)
    assert _http(_resolve_url(hub, "config.json"), Authorization="Bearer hf_stale").status_code == 200


def test_resolve_cache_307s_a_small_file_to_a_route_that_serves_it(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": WEIGHTS})
    hub.resolve_cache()
    redirect = _http(_resolve_url(hub, "config.json"))
    location = f"/api/resolve-cache/models/{REPO}/{commit}/config.json"
    assert redirect.status_code == 307 and redirect.headers["Location"] == location
    assert int(redirect.headers["Content-Length"]) == len(redirect.content) > 0
    assert _http(hub.url + location).content == CONFIG
    ranged = _http(hub.url + location, Range="bytes=2-5")
    assert ranged.status_code == 206 and ranged.content == CONFIG[2:6]
    assert hub.calls("resolvers") == 3 and hub.calls("api") == 0
    assert _http(_resolve_url(hub, "model.safetensors")).status_code == 200  # LFS: served as before


def test_resolve_cache_ignores_range_and_gzips_when_cdn_gzip_is_on(hub):
    commit = hub.add_repo(REPO, {"config.json": CONFIG})
    hub.resolve_cache()
    hub.cdn_gzip()
    answer = _http(f"{hub.url}/api/resolve-cache/models/{REPO}/{commit}/config.json", Range="bytes=2-5")
    assert answer.status_code == 200 and answer.headers["Content-Encoding"] == "gzip" and answer.content == CONFIG


def test_stall_answers_every_matching_request_late_until_stopped(hub):
    hub.add_repo(REPO, {"config.json": CONFIG})
    hub.stall("/refs", 0.5)
    for _ in range(2):
        with pytest.raises(httpx2.ReadTimeout):
            httpx2.get(f"{hub.url}/api/models/{REPO}/refs", timeout=0.1)
    assert _http(f"{hub.url}/api/models/{REPO}").status_code == 200  # another path: at once
    hub.stall("/refs", None)
    assert httpx2.get(f"{hub.url}/api/models/{REPO}/refs", timeout=0.3).status_code == 200


def test_a_commit_message_makes_branches_of_identical_files_distinct_commits(hub):
    files = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
    a = hub.add_repo(REPO, files, revision="step1000", message="step 1000")
    b = hub.add_repo(REPO, files, revision="step2000", message="step 2000")
    assert a != b and hub.add_repo(REPO, files, revision="step3000") != a  # without a message: the old id
    refs = {ref.name: ref.target_commit for ref in HfApi(endpoint=hub.url, token=False).list_repo_refs(REPO).branches}
    assert (refs["step1000"], refs["step2000"]) == (a, b)


def test_a_reuploaded_branch_reports_its_new_commit_and_the_old_stays_reachable(hub):
    api = HfApi(endpoint=hub.url, token=False)
    old = hub.add_repo(REPO, {"model.safetensors": WEIGHTS}, revision="step1000")
    new = hub.add_repo(REPO, {"model.safetensors": WEIGHTS[::-1]}, revision="step1000")
    assert {ref.name: ref.target_commit for ref in api.list_repo_refs(REPO).branches}["step1000"] == new
    assert api.model_info(REPO, revision="step1000").sha == new
    assert api.model_info(REPO, revision=old).sha == old
    assert _http(_resolve_url(hub, "model.safetensors", old)).content == WEIGHTS


def test_blobs_give_each_lfs_file_the_sha256_of_its_content_the_same_across_branches(hub):
    api = HfApi(endpoint=hub.url, token=False)
    hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": WEIGHTS}, revision="a", message="a")
    hub.add_repo(REPO, {"config.json": CONFIG, "model.safetensors": WEIGHTS}, revision="b", message="b")

    def lfs(revision):
        return {s.rfilename: s.lfs for s in api.model_info(REPO, revision=revision, files_metadata=True).siblings}

    assert (
        lfs("a")["model.safetensors"].sha256
        == hashlib.sha256(WEIGHTS).hexdigest()
        == lfs("b")["model.safetensors"].sha256
    )
    assert lfs("a")["config.json"] is None
