"""``attnstruct prepare-corpus`` against the stand-in hub: a dataset repository with two configs (parquet in row
groups, JSON lines) and a tokenizer repository, prepared, reused, read offline, resumed after a kill, through the
hub's faults, refused on bad input, and trained on."""

import hashlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

from attnstruct import results
from attnstruct.cli import dispatch
from attnstruct.tasks import prepared_corpus

from conftest import ROOT

pytestmark = pytest.mark.hub

DATASET, TOKENIZER = "org/prose", "org/tok"
SPEC = f"hf://datasets/{DATASET}"
WORDS = "the a of river stone light small old garden north winter song city bread window quiet".split()
README = """---
configs:
- config_name: en
  default: true
  data_files:
  - split: train
    path: en/train-*.parquet
  - split: validation
    path: en/validation.parquet
- config_name: fr
  data_files:
  - split: train
    path: fr/train-*.jsonl
  - split: validation
    path: fr/validation.jsonl
---
# Prose, a made-up corpus
"""
OUTPUTS = ("train.bin", "val.bin", "train.offsets.npy", "val.offsets.npy", "train.counts.npy")


def documents(n: int, seed: int) -> list[str | None]:
    """``n`` made-up documents of 20 to 60 words, one null and one blank among them."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, rng.integers(20, 60))) + "." for _ in range(n)]
    texts[3], texts[7] = None, "   "
    return texts


def parquet(texts, row_group: int) -> bytes:
    table = pa.table({"id": list(range(len(texts))), "text": texts})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group)
    return sink.getvalue()


def jsonl(texts) -> bytes:
    return b"".join(json.dumps({"body": text}).encode() + b"\n" for text in texts)


def tokenizer_json() -> str:
    """A small BERT-like WordPiece tokenizer: [PAD], [UNK], [CLS], [SEP], [MASK], the words and a full stop."""
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS])}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    return tokenizer.to_str()


TEXTS = {  # the rows of each data file, in order
    **{f"en/train-{i}.parquet": documents(48, seed=i) for i in range(3)},
    "en/validation.parquet": documents(10, seed=9),
    **{f"fr/train-{i}.jsonl": documents(12, seed=7 + i) for i in range(2)},
    "fr/validation.jsonl": documents(10, seed=11),
}
EN_TRAIN = [name for name in TEXTS if name.startswith("en/train-")]
FILES = {
    "README.md": README.encode(),
    **{name: parquet(texts, row_group=12) for name, texts in TEXTS.items() if name.endswith(".parquet")},
    **{name: jsonl(texts) for name, texts in TEXTS.items() if name.endswith(".jsonl")},
}


@pytest.fixture(scope="module")
def repos():
    return {}  # no models: this module serves a dataset and tokenizers


@pytest.fixture
def served(hub):
    """The stand-in hub with the dataset (listed 4 entries a page, so every listing takes several pages), a gated
    copy of it, the tokenizer, a repository without a tokenizer and one with a corrupt tokenizer.json."""
    hub.tree_page_size = 4
    hub.add_dataset(DATASET, FILES)
    hub.add_dataset("org/closed", FILES, gated_token="hf_accepted_licence")
    hub.add_repo(TOKENIZER, {"tokenizer.json": tokenizer_json().encode()})
    hub.add_repo("org/no-tokenizer", {"config.json": b"{}"})
    hub.add_repo("org/bad-tokenizer", {"tokenizer.json": b'{"model": '})
    return hub


def prepare(*args, capsys) -> tuple[int, str, str]:
    """``attnstruct prepare-corpus ARGS`` in this process: (exit status, stdout, stderr)."""
    status = dispatch.main(["prepare-corpus", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def prepared_folders() -> list[Path]:
    """Everything in the prepared corpora's folder of ``$ATTNSTRUCT_CACHE``, hidden partial folders included."""
    root = Path(os.environ["ATTNSTRUCT_CACHE"]) / "corpora" / "prepared"
    return sorted(root.iterdir()) if root.is_dir() else []


def identities(name: str) -> list[str]:
    """Each row's identity: ``file:row`` in a parquet file, ``file@byte offset`` in a JSON-lines file."""
    if name.endswith(".parquet"):
        return [f"{name}:{row}" for row in range(len(TEXTS[name]))]
    starts = np.cumsum([0] + [len(line) for line in FILES[name].splitlines(keepends=True)])[:-1]
    return [f"{name}@{start}" for start in starts]


def expected(names: list[str], val_fraction: float) -> dict[str, list[np.ndarray]]:
    """``{split: [ids of each document]}`` by brute force: every non-blank row of ``names``, in order, encoded with
    the tokenizer's special tokens, in ``val`` when BLAKE2b's first 8 bytes of its identity fall below the
    fraction."""
    tokenizer = Tokenizer.from_str(tokenizer_json())
    splits = {"train": [], "val": []}
    for name in names:
        for identity, text in zip(identities(name), TEXTS[name]):
            if text is None or not text.strip():
                continue
            digest = int.from_bytes(hashlib.blake2b(identity.encode(), digest_size=8).digest(), "big")
            split = "val" if digest < int(val_fraction * 2**64) else "train"
            splits[split].append(np.array(tokenizer.encode(text, add_special_tokens=True).ids))
    return splits


def text_chunks(name: str) -> list[tuple[int, int]]:
    """The bytes ``[start, end)`` of each row group's ``text`` column chunk in parquet file ``name``."""
    metadata, chunks = pq.ParquetFile(io.BytesIO(FILES[name])).metadata, []
    column = metadata.schema.names.index("text")
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(column)
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        chunks.append((start, start + chunk.total_compressed_size))
    return chunks


def ranges_read(hub, name: str) -> list[tuple[int, int]]:
    """The byte ranges ``[start, end)`` of ``name`` that GETs asked the hub for."""
    spans = []
    for method, _, header in hub.requests_for(DATASET, name):
        if method == "GET" and header:
            start, end = header.removeprefix("bytes=").split("-")
            spans.append((int(start), int(end) + 1))
    return spans


def test_the_tokens_are_those_of_a_direct_tokenisation_of_the_same_rows_split_by_document(served, capsys):
    status, out, _ = prepare(SPEC, "--tokenizer", TOKENIZER, "--val-fraction", 0.1, capsys=capsys)
    assert status == 0
    assert sum("/tree/" in path for _, path, _ in served.requests) > 1, "the listing took one page"
    (folder,) = prepared_folders()
    corpus = prepared_corpus.open_prepared(folder)
    splits = expected(EN_TRAIN, 0.1)
    train, val = (np.concatenate(splits[split]) for split in ("train", "val"))
    assert len(splits["val"]) > 0 and np.array_equal(corpus.train, train) and np.array_equal(corpus.val, val)
    for split, offsets in (("train", corpus.train_offsets), ("val", corpus.val_offsets)):
        assert np.array_equal(offsets, np.cumsum([0] + [len(ids) for ids in splits[split]])), split
    assert f"prepared: {len(train) + len(val):,} tokens ({len(train):,} train, {len(val):,} val) in " in out
    assert np.array_equal(np.load(folder / "train.counts.npy"), np.bincount(train, minlength=corpus.vocab_size))
    source = corpus.meta["source"]
    assert (source["config"], source["split"], source["files"]) == ("en", "train", EN_TRAIN)
    assert source["commit"] == served.add_dataset(DATASET, FILES)  # the same content, the same commit
    assert corpus.train.dtype == np.uint16 and corpus.mask_id == 4


def test_the_prepared_folder_holds_the_tokenizer_it_was_prepared_with(served, capsys):
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (folder,) = prepared_folders()
    corpus = prepared_corpus.open_prepared(folder)
    assert (folder / "tokenizer.json").read_text() == tokenizer_json()
    text = "The old stone window, quiet. A zebra!"
    assert corpus.tokenizer().encode(text).ids == Tokenizer.from_str(tokenizer_json()).encode(text).ids
    assert corpus.meta["tokenizer"]["digest"] == hashlib.sha256(tokenizer_json().encode()).hexdigest()


def test_the_passes_of_a_run_over_the_training_tokens_are_printed(served, capsys):
    run = ("--steps", 100, "--batch-size", 4, "--seq-len", 32)
    status, out, _ = prepare(SPEC, "--tokenizer", TOKENIZER, *run, capsys=capsys)
    assert status == 0
    train = len(prepared_corpus.open_prepared(prepared_folders()[0]).train)
    assert f"a run of 100 steps x 4 sequences x 32 tokens = 12,800 tokens makes {12_800 / train:,.2f} passes" in out


def test_a_second_run_makes_no_request(served, capsys):
    first = prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)
    served.reset_counters()
    again = prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)
    assert first[0] == again[0] == 0 and again[1] == first[1]
    assert served.requests == [] and served.cdn_requests == []


def test_offline_after_a_cached_run_it_works_and_makes_no_request(served, capsys, monkeypatch):
    status, online, _ = prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)
    served.reset_counters()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)
    assert status == offline[0] == 0 and offline[1] == online
    assert served.requests == [] and served.cdn_requests == []


def test_max_tokens_reads_the_first_row_groups_only(served, capsys):
    args = ("--max-tokens", 100, "--val-fraction", 0)
    status, out, _ = prepare(SPEC, "--tokenizer", TOKENIZER, *args, capsys=capsys)
    assert status == 0 and "prepared: 100 tokens (100 train, 0 val)" in out
    data = sum(len(FILES[name]) for name in EN_TRAIN)
    read = [served.bytes_served_for(DATASET, name) for name in EN_TRAIN]
    assert 0 < sum(read) < data / 4, (read, data)
    assert read[1:] == [0, 0], read
    chunks = text_chunks(EN_TRAIN[0])
    touched = [any(a < end and start < b for a, b in ranges_read(served, EN_TRAIN[0])) for start, end in chunks]
    assert touched == [True] + [False] * (len(chunks) - 1), touched
    first = np.concatenate(expected(EN_TRAIN[:1], 0.0)["train"])[:100]
    assert np.array_equal(prepared_corpus.open_prepared(prepared_folders()[0]).train, first)


def test_a_config_of_json_lines_with_another_field(served, capsys):
    args = ("--config", "fr", "--field", "body", "--val-fraction", 0.2)
    assert prepare(SPEC, *args, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (folder,) = prepared_folders()
    corpus = prepared_corpus.open_prepared(folder)
    splits = expected(["fr/train-0.jsonl", "fr/train-1.jsonl"], 0.2)
    assert corpus.meta["source"]["files"] == ["fr/train-0.jsonl", "fr/train-1.jsonl"] and splits["val"]
    for split, tokens in (("train", corpus.train), ("val", corpus.val)):
        assert np.array_equal(tokens, np.concatenate(splits[split])), split


@pytest.mark.parametrize(
    "args, message",
    [
        pytest.param(
            ["hf://datasets/org/missing"],
            "not found: hf://datasets/org/missing@main (no such repository",
            id="no-dataset",
        ),
        pytest.param(
            [SPEC, "--config", "de"], "config 'de' is not in hf://datasets/org/prose; its configs: en, fr", id="config"
        ),
        pytest.param([SPEC, "--split", "test"], "split 'test' is not in", id="split"),
        pytest.param(
            [SPEC, "--field", "content"],
            "field 'content' is not in the rows of org/prose/en/train-0.parquet; its fields: id, text",
            id="field",
        ),
        pytest.param(
            [SPEC, "--config", "fr"],
            "field 'text' is not in the rows of org/prose/fr/train-0.jsonl (byte 0); its fields: body",
            id="field-jsonl",
        ),
        pytest.param(["hf://datasets/org/closed", "NO_TOKEN"], "gated: hf://datasets/org/closed needs", id="gated"),
        pytest.param(
            ["hf://datasets/org/closed", "WRONG_TOKEN"], "hf://datasets/org/closed/README.md needs", id="gated-token"
        ),
        pytest.param([SPEC, "OFFLINE"], "offline: hf://datasets/org/prose@main is not in the cache", id="offline"),
        pytest.param(
            [SPEC, "--tokenizer", "org/no-tokenizer"], "the repository has no tokenizer.json", id="no-tokenizer"
        ),
        pytest.param(
            [SPEC, "--tokenizer", "org/bad-tokenizer"], "cannot read the tokenizer org/bad-tokenizer", id="bad-hub"
        ),
        pytest.param([SPEC, "--tokenizer", "broken.json"], "cannot read the tokenizer", id="bad-file"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_file(served, capsys, monkeypatch, tmp_path, args, message):
    if "OFFLINE" in args:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if "NO_TOKEN" in args:
        monkeypatch.delenv("HF_TOKEN")
    args = [a for a in args if a not in ("OFFLINE", "NO_TOKEN", "WRONG_TOKEN")]  # the fixture's token is not granted
    (tmp_path / "broken.json").write_text('{"model": ')
    monkeypatch.chdir(tmp_path)
    if "--tokenizer" not in args:
        args = [*args, "--tokenizer", TOKENIZER]
    status, out, err = prepare(*args, capsys=capsys)
    assert status == 2 and out == "", (status, out, err)
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert prepared_folders() == []


def _cache() -> Path:
    return Path(os.environ["ATTNSTRUCT_CACHE"])


@pytest.mark.parametrize("tamper", ["pin", "listing"])
def test_a_pin_or_listing_of_the_cache_that_leads_out_of_it_is_refused_without_a_request(
    served, capsys, monkeypatch, tamper
):
    """Another process wrote the cache: a pin that is a path, or a listing that names a file outside the dataset."""
    assert prepare(SPEC, "--tokenizer", TOKENIZER, "--max-tokens", 50, capsys=capsys)[0] == 0
    pins = _cache() / "corpora" / "pins.json"
    (listing,) = (_cache() / "corpora" / "manifests" / "org--prose").iterdir()
    if tamper == "pin":
        pins.write_text(json.dumps({"datasets": {f"{DATASET}@main": "../../../planted"}}))
    else:
        kept = json.loads(listing.read_text())
        kept["files"]["../../../planted.parquet"] = 10
        listing.write_text(json.dumps(kept))
    served.reset_counters()
    status, _, err = prepare(SPEC, "--tokenizer", TOKENIZER, "--max-tokens", 60, capsys=capsys)
    named = "commit id" if tamper == "pin" else "../../../planted.parquet"
    assert status == 2 and len(err.strip().splitlines()) == 1 and named in err and str(_cache()) in err, err
    assert served.requests == []


def test_a_tokenizer_left_in_the_hub_cache_by_an_earlier_version_is_read_without_a_request(served, capsys, monkeypatch):
    """Earlier versions kept a hub tokenizer in the hub cache (``HF_HUB_CACHE``) and its commit in the pins file."""
    commit = served.add_repo(TOKENIZER, {"tokenizer.json": tokenizer_json().encode()})
    snapshot = Path(os.environ["HF_HUB_CACHE"]) / "models--org--tok" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer.json").write_text(tokenizer_json())
    pins = _cache() / "corpora" / "pins.json"
    pins.parent.mkdir(parents=True)
    pins.write_text(json.dumps({"models": {f"{TOKENIZER}@main": commit}}))
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    assert served.requests_for(TOKENIZER) == []
    served.reset_counters()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0 and served.requests == []


def _aliased_card(items: int) -> str:
    """A card whose one config's ``data_files`` names, ``items`` times, an alias of one list of 100 patterns."""
    patterns = ", ".join(f"p{i}/*.parquet" for i in range(100))
    entries = "".join("  - {split: train, path: *many}\n" for _ in range(items))
    return f"---\nmany: &many [{patterns}]\nconfigs:\n- config_name: default\n  data_files:\n{entries}---\n"


def test_a_card_whose_aliases_repeat_a_list_past_the_bound_is_refused_before_it_is_expanded():
    """Ten thousand aliases of a list of a hundred patterns: a million patterns from a card of 330 kB."""
    from attnstruct.tasks.data_files import MAX_PATTERNS, CorpusError, readme_configs

    (config,) = readme_configs(_aliased_card(10), "the card")
    assert config["config_name"] == "default" and len(config["data_files"]["train"]) == 1000
    with pytest.raises(CorpusError, match=f"the card declares configs of more than {MAX_PATTERNS:,} data file"):
        readme_configs(_aliased_card(10_000), "the card")


def test_a_preparation_killed_midway_resumes_to_the_same_files_bit_for_bit(served, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "whole"))
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (whole,) = prepared_folders()
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "killed"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "killed-hub"))
    served.slow_down(0.2, path=".parquet")  # the data read slowly, so the kill lands mid-way
    env = {**os.environ, "HF_HUB_DISABLE_XET": "1", "HF_UPDATE_DOWNLOAD_COUNTS": "0", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "attnstruct", "prepare-corpus", SPEC, "--tokenizer", TOKENIZER]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = tmp_path / "killed" / "corpora" / "prepared"
    deadline = time.monotonic() + 60
    while not list(root.glob(".*.partial/shards/*.npz")) and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = sorted(path.stem for path in root.glob(".*.partial/shards/*.npz"))
    assert finished and not list(root.glob("*/meta.json")), "killed before any shard, or after the end"
    assert len(finished) < 3 * len(EN_TRAIN), "every unit was finished before the kill"
    served.slow_down(0)
    served.reset_counters()
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (resumed,) = prepared_folders()
    for name in OUTPUTS:
        assert (resumed / name).read_bytes() == (whole / name).read_bytes(), name
    units = {(EN_TRAIN[int(f)], int(p)) for f, p in (stem.split("-") for stem in finished)}
    for name in EN_TRAIN:
        for group, (start, end) in enumerate(text_chunks(name)):
            read = any(a < end and start < b for a, b in ranges_read(served, name))
            assert read == ((name, group) not in units), (name, group, "read again" if read else "never read")
    assert not any(path.startswith("/api/") for _, path, _ in served.requests), "the listing was asked for again"


def test_redirects_a_rate_limit_a_5xx_and_a_broken_transfer_leave_the_tokens_unchanged(
    served, capsys, tmp_path, monkeypatch
):
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (plain,) = prepared_folders()
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "faults"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "faults-hub"))
    served.reset_counters()
    served.redirect_large(0)
    served.rate_limit(3, retry_after=1, path=".parquet")
    served.fail_once("en/train-1.parquet", 503)
    served.break_once("en/train-2.parquet")
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (again,) = prepared_folders()
    for name in OUTPUTS:
        assert (again / name).read_bytes() == (plain / name).read_bytes(), name
    assert {fault for fault, _ in served.faults} == {"rate limited", "failed", "broken"}
    assert 1.0 in served.waits, "the Retry-After was not honoured"
    assert all(path.startswith("/cdn/datasets/") for _, path, _, _ in served.cdn_requests)
    assert served.cdn_requests and not any(auth for *_, auth in served.cdn_requests), "the CDN saw the token"


@pytest.mark.training
def test_training_on_a_hub_dataset_records_its_source_and_tokenizer(served, tmp_path):
    run_dir = tmp_path / "run"
    options = {"d-model": 16, "n-layers": 1, "n-heads": 2, "seq-len": 16, "batch-size": 4, "steps": 3, "warmup": 1}
    options |= {"log-every": 1, "eval-every": 1, "eval-batches": 1, "checkpoint-every": 3, "threads": 1}
    argv = [sys.executable, "-m", "attnstruct", "train", "--run-dir", str(run_dir), "--corpus", SPEC]
    argv += ["--corpus-config", "en", "--tokenizer", TOKENIZER, "--objective", "mlm"]
    argv += [item for name, value in options.items() for item in (f"--{name}", str(value))]
    env = {**os.environ, "HF_HUB_DISABLE_XET": "1", "HF_UPDATE_DOWNLOAD_COUNTS": "0", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    ds = results.load_dataset(run_dir / "run.nc")
    assert int(ds.step.max()) == 3 and np.isfinite(ds.train_loss.values[1:]).all()
    assert (ds.attrs["corpus_dataset"], ds.attrs["corpus_config"]) == (DATASET, "en")
    assert ds.attrs["corpus_commit"] == served.add_dataset(DATASET, FILES)
    assert ds.attrs["tokenizer"] == TOKENIZER
    assert ds.attrs["tokenizer_digest"] == hashlib.sha256(tokenizer_json().encode()).hexdigest()


def test_the_named_corpora_are_listed_with_their_licences(capsys):
    status, out, _ = prepare("--list", capsys=capsys)
    assert status == 0
    for name in ("wikipedia-en", "wikitext-103", "fineweb-edu-10bt", "redpajama-sample", "jigsaw-toxic"):
        assert f"{name}: hf://datasets/" in out
    assert out.count("licence: ") == 5 and "CC BY-SA 3.0" in out and "ODC-By 1.0" in out


def test_worker_processes_give_the_same_files(served, capsys, tmp_path, monkeypatch):
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (one,) = prepared_folders()
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "workers"))
    assert prepare(SPEC, "--tokenizer", TOKENIZER, "--workers", 2, capsys=capsys)[0] == 0
    (two,) = prepared_folders()
    assert one.name == two.name
    for name in OUTPUTS:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_a_bpe_vocabulary_past_the_bound_is_refused_before_any_text_is_read(tmp_path):
    from attnstruct.tasks import plays_and_text_files, text_config
    from attnstruct.tasks.source_documents import CorpusError
    from attnstruct.tasks.tokenizer_sources import resolve_tokenizer

    def no_text(n_chars):
        raise AssertionError("text was read for a tokenizer that cannot be trained")

    for spec in ("bpe:99999999999999", f"bpe:{text_config.MAX_BPE_VOCAB + 1}"):
        with pytest.raises(CorpusError, match=f"{spec}: a byte-level BPE trained here has a vocabulary of at most"):
            resolve_tokenizer(spec, sample=no_text, cache=tmp_path)
    with pytest.raises(ValueError, match="vocab_size must be an integer from 300"):
        plays_and_text_files.train_tokenizer(["a b c"], 2**40, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_counts_and_workers_past_their_bounds_are_refused():
    import argparse

    from attnstruct.cli import prepare as command
    from attnstruct.tasks.source_documents import CorpusError

    assert command.count("1.5B") == 1_500_000_000 and command.count(f"{command.MOST}") == command.MOST
    for text in ("1e30", "1e400", "-5", "0"):
        with pytest.raises(argparse.ArgumentTypeError):
            command.count(text)
    with pytest.raises(CorpusError, match="workers must be at most"):
        prepared_corpus._check(None, 0.005, 10**8)
    with pytest.raises(CorpusError, match="max_tokens must be an integer from 1 to 2\\*\\*62"):
        prepared_corpus._check(2**70, 0.005, 1)


def test_a_source_that_is_a_device_is_not_called_missing():
    from attnstruct.tasks.source_documents import CorpusError, local_source

    with pytest.raises(CorpusError, match="neither a regular file nor a folder"):
        local_source("/dev/null", None, None, None)


@pytest.mark.signals
@pytest.mark.parametrize("seed", range(min(5, int(os.environ.get("ATTNSTRUCT_SIGNAL_REPEATS", "8")))))
def test_ctrl_c_stops_a_preparation_in_one_line_with_130_and_the_rerun_gives_the_same_bytes(
    served, capsys, tmp_path, monkeypatch, seed
):
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "whole"))
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (whole,) = prepared_folders()
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "stopped"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "stopped-hub"))
    served.slow_down(0.2, path=".parquet")  # the data read slowly, so that Ctrl-C lands mid-way
    env = {**os.environ, "HF_HUB_DISABLE_XET": "1", "HF_UPDATE_DOWNLOAD_COUNTS": "0", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "attnstruct", "prepare-corpus", SPEC, "--tokenizer", TOKENIZER]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = tmp_path / "stopped" / "corpora" / "prepared"
    deadline = time.monotonic() + 60
    while not list(root.glob(".*.partial")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(random.Random(seed).uniform(0.0, 1.5))
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == 130, f"exit status {process.returncode}; stderr:\n{err[-3000:]}"
    assert lines[0].startswith("preparing "), err[-3000:]  # what it prints when it starts, then the one line
    assert len(lines) == 2 and lines[1].startswith("attnstruct prepare-corpus: interrupted"), err[-3000:]
    assert "run the same command to resume" in lines[1] and "Traceback" not in err
    cache = tmp_path / "stopped"
    assert not [p for p in cache.rglob("*") if p.name.endswith(".tmp")], "a half-written file was left"
    assert not list(root.glob("*/meta.json")), "the corpus was finished although Ctrl-C came before its end"
    for shard in root.glob(".*.partial/shards/*.npz"):  # each finished unit whole
        with np.load(shard) as arrays:
            assert arrays.files, shard.name
    served.slow_down(0)
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    (resumed,) = prepared_folders()
    for name in OUTPUTS:
        assert (resumed / name).read_bytes() == (whole / name).read_bytes(), name


def test_a_hub_error_of_a_corpus_request_is_a_corpus_error_of_the_same_line():
    from attnstruct.hub_client.failures import HubError
    from attnstruct.tasks.data_files import CorpusError
    from attnstruct.tasks.hub_datasets import from_hub

    def refused(what):
        raise HubError(f"the hub refused {what} (HTTP 429; 3 tries): try again later", "rate limited")

    with pytest.raises(CorpusError) as caught:
        from_hub(refused, "hf://datasets/org/set")
    assert (
        str(caught.value) == "rate limited: the hub refused hf://datasets/org/set (HTTP 429; 3 tries): try again later"
    )
