"""The hub path against a hub that lies, stalls or traps (docs/security.md): a mirror or proxy behind ``HF_ENDPOINT``,
compromised, misconfigured or slow, played by the stand-in hub's misbehaving modes (tests/standin_hub.py).

Every case runs the command line in this process and holds it to the hostile rule (tests/hostile.py): one line and
exit 2 naming the problem, nothing written outside the two caches (``HF_HUB_CACHE`` and ``ATTNSTRUCT_CACHE``, both
under the test's folder, whose other contents are watched), no byte of a gated repository read with the user's
token, no wait longer than the bounds of the retry policy (shortened here, so that a case takes seconds).
"""

import json
import struct
import threading
import time

import pytest
from safetensors import safe_open
from standin_hub import SparseFile

from attnstruct import cli
from attnstruct.hub_client import client as hub_client

from hostile import TreeWatch, assert_refused

pytestmark = [pytest.mark.hostile, pytest.mark.hub]

BERT = "tiny/bert"
TOKEN = "hf_test_token_not_real"  # the user's token in the hub fixture (tests/conftest.py)
CACHES = ("hf-cache", "attnstruct-cache")


def _outside_the_caches(watch: TreeWatch) -> set[str]:
    return {path for path in watch.changed() if path.split("/")[0] not in CACHES}


def _within(seconds: float, command: list[str]) -> int:
    """``cli.main(command)``'s status, failing the test if it has not returned after ``seconds``."""
    done = {}
    thread = threading.Thread(target=lambda: done.setdefault("status", cli.main(command)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert "status" in done, f"attnstruct {' '.join(command)} still waiting after {seconds} s"
    return done["status"]


def _safetensors(header: dict | str, data: bytes) -> bytes:
    text = header if isinstance(header, str) else json.dumps(header)
    return struct.pack("<Q", len(text.encode())) + text.encode() + data


def _split(blob: bytes) -> tuple[dict, bytes]:
    """The header (as a dict) and the data of a safetensors file."""
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]


@pytest.fixture
def bert_files(repos):
    """The tiny BERT's config.json and model.safetensors, as bytes."""
    folder = repos[BERT]
    return (folder / "config.json").read_bytes(), (folder / "model.safetensors").read_bytes()


# -- names from the hub that would lead out of the cache ---------------------------------------------------------


@pytest.mark.parametrize("sha", ["../../../../escape", "<absolute>"])
def test_a_commit_id_that_is_a_path_is_refused_and_nothing_is_written_outside_the_caches(hub, tmp_path, capsys, sha):
    sha = str(tmp_path / "escape") if sha == "<absolute>" else sha
    hub.misreport(BERT, sha=sha)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["score", BERT])
    assert_refused(status, capsys.readouterr().err, "commit id", BERT)
    assert _outside_the_caches(watch) == set()
    assert hub.requests_for(BERT, "config.json") == []


def test_an_etag_that_is_a_path_writes_nothing_outside_the_caches(hub, repos, tmp_path, capsys):
    hub.misreport(BERT, etag="../../../escape")  # hf_hub_download names a file of its cache by the ETag
    with TreeWatch(tmp_path) as watch:
        assert cli.main(["score", BERT]) == 0
    assert _outside_the_caches(watch) == set()
    scored = capsys.readouterr().out
    assert cli.main(["score", str(repos[BERT])]) == 0 and capsys.readouterr().out == scored


@pytest.mark.parametrize(
    "index, weights_of",
    [("model.safetensors.index.json", "tiny/bert"), ("pytorch_model.bin.index.json", "tiny/bin-only")],
)
def test_a_shard_index_naming_a_file_of_another_repository_is_refused_before_it_is_read(
    hub, repos, capsys, index, weights_of
):
    """A public repository's index whose ``weight_map`` climbs out of its ``/resolve/`` URL into a gated
    repository that the user's token opens: the URL would be normalised into the gated one."""
    weights = "model.safetensors" if index.startswith("model") else "pytorch_model.bin"
    gated = hub.add_folder("org/gated", repos[weights_of], gated_token=TOKEN)
    escape = f"../../../../org/gated/resolve/{gated}/{weights}"
    names = _split((repos[BERT] / "model.safetensors").read_bytes())[0]
    weight_map = {name: escape for name in names if name != "__metadata__"}
    files = {"config.json": (repos[BERT] / "config.json").read_bytes()}
    files[index] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    hub.add_repo("evil/public", files)
    assert_refused(cli.main(["score", "evil/public"]), capsys.readouterr().err, index, "evil/public")
    assert hub.requests_for("org/gated") == [] and hub.bytes_served_for("org/gated") == 0


@pytest.mark.parametrize(
    "index",
    [
        b"not json",
        b"[]",
        b'{"metadata": {}}',
        b'{"weight_map": ["model.safetensors"]}',
        b'{"weight_map": {"a.weight": 3}}',
        b'{"weight_map": {"a.weight": "/etc/passwd"}}',
        b'{"weight_map": {"a.weight": "model-00002-of-00002.safetensors"}}',
    ],
    ids=["not-json", "a-list", "no-weight-map", "weight-map-a-list", "a-number", "absolute", "not-in-the-repo"],
)
def test_a_shard_index_that_is_not_an_index_of_the_repository_is_one_line(hub, bert_files, capsys, index):
    config, weights = bert_files
    files = {"config.json": config, "model-00001-of-00002.safetensors": weights}
    hub.add_repo("odd/index", files | {"model.safetensors.index.json": index})
    assert_refused(cli.main(["score", "odd/index"]), capsys.readouterr().err, "model.safetensors.index.json")


# -- waits without end ---------------------------------------------------------------------------------------------


def test_an_endless_retry_after_of_a_whole_file_is_not_waited_for(hub, capsys):
    hub.rate_limit(every=1, retry_after=999_999, path="config.json")  # 11.6 days
    status = _within(30, ["score", BERT])
    line = assert_refused(status, capsys.readouterr().err, "config.json", "999999")
    assert line.startswith("attnstruct: error: rate limited: ") and hub.waits == []


@pytest.mark.parametrize(
    "path, headers, named",
    [
        ("model.safetensors", False, "model.safetensors"),
        ("model.safetensors", True, "model.safetensors"),
        ("config.json", False, "config.json"),
        ("/api/models/", False, f"{BERT}@main"),
    ],
    ids=["range-body", "range-headers", "whole-file", "model-info"],
)
def test_a_trickling_answer_is_given_up_at_its_deadline(hub, capsys, monkeypatch, path, headers, named):
    """One byte every 0.2 s: each read of the HTTP client gets a byte in time, the answer never ends. With 1 s before
    a byte must have come, and the default minimum rate after it, each of the two attempts ends after about 1 s."""
    policy = hub_client.RetryPolicy(sleep=hub.waits.append, timeout_s=1.0, failures=1)
    monkeypatch.setattr(hub_client, "DEFAULT_POLICY", policy)
    hub.trickle(0.2, path, headers=headers)
    began = time.monotonic()
    status = _within(30, ["score", BERT])
    assert_refused(status, capsys.readouterr().err, named)
    assert time.monotonic() - began < 10


# -- answers too large for what was asked --------------------------------------------------------------------------


def test_a_whole_file_answer_to_a_range_request_far_into_the_file_is_refused_before_its_body(hub, bert_files, capsys):
    """A server that ignores ``Range`` answers each read of a few bytes of a 256 MiB file with all of it: the
    header's reads near the start are read up to their end, the first read past the slack is refused in one line."""
    config, weights = bert_files
    header, data = _split(weights)
    padding = 256 << 20
    header["zz.padding"] = {"dtype": "U8", "shape": [padding], "data_offsets": [len(data), len(data) + padding]}
    head = _safetensors(header, data)
    hub.add_repo(
        "big/no-ranges", {"config.json": config, "model.safetensors": SparseFile(len(head) + padding, {0: head})}
    )
    hub.ignore_ranges("model.safetensors")
    status, err = cli.main(["score", "big/no-ranges"]), capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "with the whole file (HTTP 200)" in err
    assert hub.bytes_served_for("big/no-ranges", "model.safetensors") < 16 << 20  # socket buffers, of 256 MiB
    assert all(r is not None for m, p, r in hub.requests_for("big/no-ranges", "model.safetensors") if m == "GET")


# -- ref names that would add a line to a list ---------------------------------------------------------------------


@pytest.mark.parametrize("lie", ["name", "commit"])
def test_a_ref_that_is_not_a_revision_name_and_commit_is_refused_and_no_list_is_written(
    hub, repos, tmp_path, capsys, lie
):
    local = str(tmp_path / "local-model")
    hub.add_folder("series/evil", repos[BERT], revision=f"step1\n{local}" if lie == "name" else "step1")
    if lie == "commit":
        hub.misreport("series/evil", sha=f"../{local}")
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["revisions", "series/evil", "--out", str(tmp_path / "list.csv")])
    out, err = capsys.readouterr()
    assert_refused(status, err, "series/evil")
    assert out == "" and watch.changed() == set()


# -- safetensors headers the format forbids --------------------------------------------------------------------------


def _layer0(header: dict, which: str) -> str:
    return next(name for name in header if name.startswith("encoder.layer.0.") and name.endswith(f"{which}.weight"))


def _overlap(header: dict, data: bytes):
    """The key weight of layer 0 lies where its query weight lies: W_q = W_k, symmetry +1."""
    header[_layer0(header, "attention.self.key")]["data_offsets"] = header[_layer0(header, "query")]["data_offsets"]
    return header, data


def _negative(header: dict, data: bytes):
    """The query weight of layer 0 begins before the data: its bytes would be the header's."""
    entry = header[_layer0(header, "query")]
    begin, end = entry["data_offsets"]
    entry["data_offsets"] = [-64, -64 + end - begin]
    return header, data


def _hole(header: dict, data: bytes):
    """Four bytes that no tensor covers, after the first tensor."""
    entries = sorted((e for name, e in header.items() if name != "__metadata__"), key=lambda e: e["data_offsets"])
    cut = entries[0]["data_offsets"][1]
    for entry in entries[1:]:
        entry["data_offsets"] = [n + 4 for n in entry["data_offsets"]]
    return header, data[:cut] + bytes(4) + data[cut:]


def _short_shape(header: dict, data: bytes):
    entry = header[_layer0(header, "query")]
    entry["shape"] = [entry["shape"][0] - 1, entry["shape"][1]]
    return header, data


def _float_shape(header: dict, data: bytes):
    entry = header[_layer0(header, "query")]
    entry["shape"] = [float(n) for n in entry["shape"]]
    return header, data


def _unknown_dtype(header: dict, data: bytes):
    next(e for name, e in header.items() if name != "__metadata__" and e["dtype"] == "F32")["dtype"] = "F31"
    return header, data


def _trailing(header: dict, data: bytes):
    return header, data + b"\0" * 16


def _duplicate(header: dict, data: bytes):
    """A second entry for the query weight of layer 0 (JSON allows it; the format does not): the value read would
    be that of whichever one a parser keeps."""
    name = _layer0(header, "query")
    key = header[_layer0(header, "attention.self.key")]
    text = json.dumps(header)
    return text[:-1] + f', "{name}": {json.dumps(key)}' + "}", data


def _nan(header: dict, data: bytes):
    return json.dumps(header)[:-1] + ', "x": NaN}', data


def _metadata_not_text(header: dict, data: bytes):
    header["__metadata__"] = {"format": 1}
    return header, data


def _not_an_object(header: dict, data: bytes):
    return "[]", b""


BAD_HEADERS = {
    "overlapping-offsets": _overlap,
    "negative-offset": _negative,
    "a-hole-before-the-data": _hole,
    "bytes-not-the-shape": _short_shape,
    "a-float-in-a-shape": _float_shape,
    "an-unknown-dtype": _unknown_dtype,
    "bytes-after-the-last-tensor": _trailing,
    "a-duplicate-name": _duplicate,
    "nan-in-the-json": _nan,
    "metadata-not-text": _metadata_not_text,
    "not-an-object": _not_an_object,
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_a_safetensors_header_the_library_refuses_is_refused_on_the_hub(hub, bert_files, tmp_path, capsys, case):
    config, weights = bert_files
    header, data = BAD_HEADERS[case](*_split(weights))
    blob = _safetensors(header, data)
    (tmp_path / "bad.safetensors").write_bytes(blob)
    with pytest.raises(Exception):  # noqa: B017, PT011 (the library's error types are not part of its interface)
        with safe_open(tmp_path / "bad.safetensors", "pt") as opened:
            for name in opened.keys():
                opened.get_tensor(name)
    hub.add_repo(f"bad/{case}", {"config.json": config, "model.safetensors": blob})
    assert_refused(cli.main(["score", f"bad/{case}"]), capsys.readouterr().err, "model.safetensors")


# -- a file list naming files outside the repository -----------------------------------------------------------------


def test_a_file_list_naming_a_file_outside_the_repository_is_refused(hub, bert_files, tmp_path, capsys):
    config, _ = bert_files
    hub.add_repo("evil/listing", {"config.json": config, "../../../../escape.gguf": b"GGUF" + bytes(60)})
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["score", "evil/listing"])
    assert_refused(status, capsys.readouterr().err, "../../../../escape.gguf", "evil/listing")
    assert _outside_the_caches(watch) == set() and hub.requests_for("evil/listing", "../../../../escape.gguf") == []


# -- the caches, which another process may have changed ------------------------------------------------------------


@pytest.mark.parametrize("lead", ["ref", "link"])
def test_a_hub_cache_whose_snapshot_leads_out_of_the_cache_is_refused(hub, bert_files, tmp_path, capsys, lead):
    """``refs/main`` names a folder outside the hub cache, or a snapshot's file is a link to one outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, content in zip(("config.json", "model.safetensors"), bert_files):
        (outside / name).write_bytes(content)
    storage = tmp_path / "hf-cache" / "models--tiny--bert"
    commit = "0" * 40 if lead == "link" else "../../../outside"
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "main").write_text(commit)
    (storage / "snapshots").mkdir()
    if lead == "link":
        (storage / "snapshots" / commit).mkdir()
        for name in ("config.json", "model.safetensors"):
            (storage / "snapshots" / commit / name).symlink_to(outside / name)
    status = cli.main(["score", BERT])
    assert_refused(status, capsys.readouterr().err, "commit id" if lead == "ref" else "would lead out of")
    assert hub.requests == []


def test_a_pin_of_attnstructs_cache_that_leads_out_of_it_is_refused(hub, tmp_path, capsys):
    """``refs/main`` names a manifest elsewhere in the cache, by a commit id that, as a folder of ranges, would lie
    outside the cache."""
    refs = tmp_path / "attnstruct-cache" / "hub" / "tiny--bert" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("../../../planted")
    manifest = {"files": ["config.json", "model.safetensors"], "sizes": {}}
    (tmp_path / "attnstruct-cache" / "planted.json").write_text(json.dumps(manifest))
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["score", BERT])
    assert_refused(status, capsys.readouterr().err, "commit id", "refs")
    assert _outside_the_caches(watch) == set() and hub.requests == []
