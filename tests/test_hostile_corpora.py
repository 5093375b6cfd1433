"""The hub path of corpora and tokenizers against a hub that lies, stalls or traps (docs/security.md): a mirror or
proxy behind ``HF_ENDPOINT``, compromised, misconfigured or slow, played by the stand-in hub's misbehaving modes
(tests/standin_hub.py).

Every case runs ``attnstruct prepare-corpus hf://datasets/...`` with a hub tokenizer in this process and holds it to
the hostile rule (tests/hostile.py): one line and exit 2 naming the problem, nothing written outside the two caches
(``HF_HUB_CACHE`` and ``ATTNSTRUCT_CACHE``, both under the test's folder, whose other contents are watched), no
token sent to another origin, no wait longer than the bounds of the retry policy (shortened here, so that a case
takes seconds).
"""

import io
import struct
import threading
import time

import pyarrow.parquet as pq
import pytest
from standin_hub import SparseFile
from test_prepare_corpus import DATASET, FILES, TOKENIZER, parquet, tokenizer_json

from attnstruct import cli
from attnstruct.hub_client import client as hub_client

from hostile import TreeWatch, assert_refused

pytestmark = [pytest.mark.hostile, pytest.mark.hub]

SPEC = f"hf://datasets/{DATASET}"
CACHES = ("hf-cache", "attnstruct-cache")


@pytest.fixture(scope="module")
def repos():
    return {}  # no models: this module serves a dataset and a tokenizer


@pytest.fixture
def served(hub):
    """The stand-in hub with the dataset (listed 4 entries a page) and the tokenizer."""
    hub.tree_page_size = 4
    hub.add_dataset(DATASET, FILES)
    hub.add_repo(TOKENIZER, {"tokenizer.json": tokenizer_json().encode()})
    return hub


def _outside_the_caches(watch: TreeWatch) -> set[str]:
    return {path for path in watch.changed() if path.split("/")[0] not in CACHES}


def _within(seconds: float, *args: str) -> int:
    """``attnstruct prepare-corpus ARGS``'s status, failing the test if it has not returned after ``seconds``."""
    done = {}
    command = ["prepare-corpus", *args]
    thread = threading.Thread(target=lambda: done.setdefault("status", cli.main(command)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert "status" in done, f"attnstruct {' '.join(command)} still waiting after {seconds} s"
    return done["status"]


def _short_deadlines(hub, monkeypatch) -> None:
    """1 s before an answer's first byte must have come, one retry: a stalled request ends in about 2 s."""
    policy = hub_client.RetryPolicy(sleep=hub.waits.append, timeout_s=1.0, failures=1)
    monkeypatch.setattr(hub_client, "DEFAULT_POLICY", policy)


# -- names from the hub that would lead out of the cache ---------------------------------------------------------


@pytest.mark.parametrize("sha", ["../../../escape", "<absolute>"])
@pytest.mark.parametrize("repo", [DATASET, TOKENIZER])
def test_a_commit_id_that_is_a_path_is_refused_and_nothing_is_written_outside_the_caches(
    served, tmp_path, capsys, repo, sha
):
    """The hub tells the lie consistently: the info, the refs, the ``X-Repo-Commit`` of every file, and it serves the
    files under that revision."""
    sha = str(tmp_path / "escape") if sha == "<absolute>" else sha
    served.misreport(repo, sha=sha)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["prepare-corpus", SPEC, "--tokenizer", TOKENIZER])
    assert_refused(status, capsys.readouterr().err, "commit id", repo)
    assert _outside_the_caches(watch) == set()
    assert served.requests_for(repo, "README.md") == served.requests_for(repo, "tokenizer.json") == []


def _planted(tmp_path) -> str:
    """A parquet file outside both caches, of text a user would not want read as a corpus."""
    planted = tmp_path / "private" / "train.parquet"
    planted.parent.mkdir()
    planted.write_bytes(parquet(["a private letter, not a corpus"] * 4, row_group=2))
    return str(planted)


@pytest.mark.parametrize("name", ["../../../escape/train.parquet", "<absolute>", "data\\..\\..\\train.parquet"])
def test_a_tree_naming_a_file_outside_the_dataset_is_refused_before_anything_is_read(served, tmp_path, capsys, name):
    """The tree lists, beside a true data file, one whose name climbs out of the dataset, or one that is an absolute
    path (a local file the hub cache's lookup would join to, a letter planted there), and the card makes every
    parquet file a ``train`` file."""
    name = _planted(tmp_path) if name == "<absolute>" else name
    card = b'---\nconfigs:\n- config_name: default\n  data_files: "**/*.parquet"\n---\n'
    files = {"README.md": card, "data/train.parquet": FILES["en/train-0.parquet"], name: FILES["en/train-1.parquet"]}
    served.add_dataset("evil/tree", files)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["prepare-corpus", "hf://datasets/evil/tree", "--tokenizer", TOKENIZER])
    assert_refused(status, capsys.readouterr().err, "evil/tree", "as a file")
    assert _outside_the_caches(watch) == set()
    assert served.requests_for("evil/tree", "data/train.parquet") == []


def test_an_etag_that_is_a_path_writes_nothing_outside_the_caches(served, tmp_path, capsys):
    """``hf_hub_download`` named a file of its cache by the ETag: the card and the tokenizer go into attnstruct's cache
    by the names attnstruct gives them, and the preparation succeeds."""
    served.misreport(DATASET, etag="../../../escape")
    served.misreport(TOKENIZER, etag="../../../escape-tokenizer")
    with TreeWatch(tmp_path) as watch:
        assert cli.main(["prepare-corpus", SPEC, "--tokenizer", TOKENIZER]) == 0
    assert _outside_the_caches(watch) == set()
    assert "prepared: " in capsys.readouterr().out


# -- waits without end ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, named",
    [("/tree/", DATASET), ("README.md", "README.md"), ("tokenizer.json", "tokenizer.json")],
    ids=["tree", "card", "tokenizer"],
)
def test_an_endless_retry_after_is_not_waited_for(served, capsys, path, named):
    served.rate_limit(every=1, retry_after=999_999, path=path)  # 11.6 days
    status = _within(30, SPEC, "--tokenizer", TOKENIZER)
    line = assert_refused(status, capsys.readouterr().err, named, "999999")
    assert line.startswith("attnstruct: error: rate limited: ") and served.waits == []


@pytest.mark.parametrize(
    "path, headers, named",
    [
        ("/api/datasets/", False, DATASET),
        ("/tree/", True, DATASET),
        ("README.md", False, "README.md"),
        ("/api/models/", False, TOKENIZER),
        ("tokenizer.json", False, "tokenizer.json"),
    ],
    ids=["dataset-info", "tree-headers", "card", "tokenizer-info", "tokenizer"],
)
def test_a_trickling_answer_is_given_up_at_its_deadline(served, capsys, monkeypatch, path, headers, named):
    """One byte every 0.2 s: each read of the HTTP client gets a byte in time, the answer never ends. With 1 s before
    a byte must have come, and the default minimum rate after it, each of the two attempts ends after about 1 s."""
    _short_deadlines(served, monkeypatch)
    served.trickle(0.2, path, headers=headers)
    began = time.monotonic()
    status = _within(30, SPEC, "--tokenizer", TOKENIZER)
    assert_refused(status, capsys.readouterr().err, named)
    assert time.monotonic() - began < 10


# -- answers too large for what was asked --------------------------------------------------------------------------


def _padded(data: bytes, padding: int) -> SparseFile:
    """A parquet file with ``padding`` zero bytes between its column chunks and its footer (which a reader finds
    from the end, and whose offsets are from the start: still the same file to it)."""
    length = struct.unpack("<I", data[-8:-4])[0]
    body, footer = data[: -8 - length], data[-8 - length :]
    return SparseFile(len(body) + padding + len(footer), {0: body, len(body) + padding: footer})


def test_a_whole_file_answer_to_a_range_request_is_refused_before_the_file_is_read(served, tmp_path, capsys):
    """A server that ignores ``Range`` answers the read of a 256 MiB parquet file's last 8 bytes (where its footer
    begins) with all of it: everything before them would have to be read to reach them."""
    padding = 256 << 20
    big = _padded(FILES["en/train-0.parquet"], padding)
    assert pq.ParquetFile(io.BytesIO(big.read())).metadata.num_rows == 48  # a valid parquet file
    served.add_dataset("big/no-ranges", {"data/train.parquet": big})
    served.ignore_ranges(".parquet")
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["prepare-corpus", "hf://datasets/big/no-ranges", "--tokenizer", TOKENIZER])
    assert_refused(status, capsys.readouterr().err, "data/train.parquet", "Range")
    assert served.bytes_served_for("big/no-ranges") < padding // 4
    assert _outside_the_caches(watch) == set()


# -- a tree listing whose pages lead elsewhere, or on without end ---------------------------------------------------


def test_a_next_page_on_another_origin_is_refused_and_nothing_goes_there(served, tmp_path, capsys):
    served.mislink_tree(origin=served.cdn_url)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["prepare-corpus", SPEC, "--tokenizer", TOKENIZER])
    assert_refused(status, capsys.readouterr().err, DATASET, served.cdn_url)
    assert served.cdn_requests == [], "a request (with the token?) went to the other origin"
    assert _outside_the_caches(watch) == set()


def test_an_endless_chain_of_next_pages_is_followed_no_further_than_the_bound(served, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(hub_client, "MAX_PAGES", 20, raising=False)
    served.mislink_tree(endless=True)
    with TreeWatch(tmp_path) as watch:
        status = _within(30, SPEC, "--tokenizer", TOKENIZER)
    assert_refused(status, capsys.readouterr().err, DATASET, "20 pages")
    assert sum("/tree/" in path for _, path, _ in served.requests) == 20
    assert _outside_the_caches(watch) == set()
