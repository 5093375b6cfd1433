"""``attnstruct prepare-corpus`` against the stand-in hub: a dataset repository with two configs (parquet in row
groups, JSON lines) and a tokenizer repository, prepared, reused, read offline, resumed after a kill, through the
hub's faults, refused on bad input, and trained on."""

import hashlib
import io
import json
import os
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
  data_files: fr/*.jsonl
---
# Prose, a made-up corpus
"""


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


TRAIN_FILES = {f"en/train-{i}.parquet": documents(48, seed=i) for i in range(3)}
FILES = {
    "README.md": README.encode(),
    **{name: parquet(texts, row_group=12) for name, texts in TRAIN_FILES.items()},
    "en/validation.parquet": parquet(documents(10, seed=9), row_group=10),
    "fr/notes.jsonl": b"".join(json.dumps({"body": t}).encode() + b"\n" for t in documents(12, seed=7) if t),
}


@pytest.fixture(scope="module")
def repos():
    return {}  # no models: this module serves a dataset and a tokenizer


@pytest.fixture
def served(hub):
    hub.add_dataset(DATASET, FILES)
    hub.add_dataset("org/closed", FILES, gated_token="hf_accepted_licence")
    hub.add_repo(TOKENIZER, {"tokenizer.json": tokenizer_json().encode()})
    hub.add_repo("org/no-tokenizer", {"config.json": b"{}"})
    return hub


def prepare(*args, capsys) -> tuple[int, str, str]:
    """``attnstruct prepare-corpus ARGS`` in this process: (exit status, stdout, stderr)."""
    status = dispatch.main(["prepare-corpus", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def prepared_folders() -> list[Path]:
    root = Path(os.environ["ATTNSTRUCT_CACHE"]) / "corpora" / "prepared"
    return sorted(root.iterdir()) if root.is_dir() else []


def expected_splits(val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation ids by brute force: every non-blank row of the train files, in order, encoded with the
    tokenizer's special tokens, in validation when BLAKE2b's first 8 bytes of ``file:row`` fall below the fraction."""
    tokenizer = Tokenizer.from_str(tokenizer_json())
    train, val = [], []
    for name, texts in TRAIN_FILES.items():
        for row, text in enumerate(texts):
            if text is None or not text.strip():
                continue
            ids = tokenizer.encode(text, add_special_tokens=True).ids
            digest = int.from_bytes(hashlib.blake2b(f"{name}:{row}".encode(), digest_size=8).digest(), "big")
            (val if digest < int(val_fraction * 2**64) else train).extend(ids)
    return np.array(train), np.array(val)


def test_the_tokens_are_those_of_a_direct_tokenisation_of_the_same_rows(served, capsys):
    run = ("--steps", 100, "--batch-size", 4, "--seq-len", 32)
    status, out, _ = prepare(SPEC, "--tokenizer", TOKENIZER, "--val-fraction", 0.1, *run, capsys=capsys)
    assert status == 0
    (folder,) = prepared_folders()
    corpus = prepared_corpus.open_prepared(folder)
    train, val = expected_splits(0.1)
    assert len(val) > 0 and np.array_equal(corpus.train, train) and np.array_equal(corpus.val, val)
    assert f"prepared: {len(train) + len(val):,} tokens ({len(train):,} train, {len(val):,} val)" in out
    passes = f"a run of 100 steps x 4 sequences x 32 tokens = 12,800 tokens makes {12_800 / len(train):,.2f} passes"
    assert passes in out
    assert corpus.meta["source"]["config"] == "en" and corpus.meta["source"]["split"] == "train"
    assert corpus.meta["source"]["commit"] == served.add_dataset(DATASET, FILES)  # the same content, the same commit
    assert corpus.train.dtype == np.uint16 and corpus.mask_id == 4
    assert np.array_equal(np.load(folder / "train.counts.npy"), np.bincount(train, minlength=corpus.vocab_size))
    assert corpus.tokenizer().encode("old stone").ids == Tokenizer.from_str(tokenizer_json()).encode("old stone").ids


def test_a_second_run_makes_no_request_and_offline_it_reads_the_cache(served, capsys, monkeypatch):
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    served.reset_counters()
    status, again, _ = prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)
    assert status == 0 and served.requests == [] and served.cdn_requests == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    status, offline, _ = prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)
    assert status == 0 and offline == again and served.requests == []


def test_max_tokens_reads_the_first_row_groups_only(served, capsys):
    status, out, _ = prepare(SPEC, "--tokenizer", TOKENIZER, "--max-tokens", 100, capsys=capsys)
    assert status == 0 and "prepared: 100 tokens" in out
    data = sum(len(content) for name, content in FILES.items() if name.startswith("en/train"))
    read = sum(served.bytes_served_for(DATASET, name) for name in TRAIN_FILES)
    assert 0 < read < data / 4, (read, data)
    assert served.bytes_served_for(DATASET, "en/train-2.parquet") == 0


def test_a_config_of_json_lines_with_another_field(served, capsys):
    status, out, _ = prepare(SPEC, "--config", "fr", "--field", "body", "--tokenizer", TOKENIZER, capsys=capsys)
    assert status == 0
    (folder,) = prepared_folders()
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["source"]["files"] == ["fr/notes.jsonl"] and meta["documents"]["train"] + meta["documents"]["val"] == 10


@pytest.mark.parametrize(
    "args, message",
    [
        (["hf://datasets/org/missing"], "not found"),
        ([SPEC, "--config", "de"], "config 'de' is not in hf://datasets/org/prose; its configs: en, fr"),
        ([SPEC, "--split", "test"], "split 'test' is not in"),
        (
            [SPEC, "--field", "content"],
            "field 'content' is not in the rows of org/prose/en/train-0.parquet; its fields: id, text",
        ),
        (["hf://datasets/org/closed"], "gated"),
        ([SPEC, "--offline"], "offline"),
        ([SPEC, "--tokenizer", "org/no-tokenizer"], "the repository has no tokenizer.json"),
        ([SPEC, "--tokenizer", "broken.json"], "cannot read the tokenizer"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_file(served, capsys, monkeypatch, tmp_path, args, message):
    if "--offline" in args:
        args = [a for a in args if a != "--offline"]
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if "gated" == message:
        monkeypatch.delenv("HF_TOKEN")
    (tmp_path / "broken.json").write_text('{"model": ')
    monkeypatch.chdir(tmp_path)
    if "--tokenizer" not in args:
        args = [*args, "--tokenizer", TOKENIZER]
    status, out, err = prepare(*args, capsys=capsys)
    assert status == 2 and out == "", (status, out, err)
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert prepared_folders() == []


def test_a_preparation_killed_midway_resumes_to_the_same_files_bit_for_bit(served, capsys, tmp_path, monkeypatch):
    whole_cache = tmp_path / "whole"
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(whole_cache))
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    whole = prepared_folders()[0]
    served.reset_counters()
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "killed"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "killed-hub"))
    served.slow_down(0.25)
    command = [sys.executable, "-m", "attnstruct", "prepare-corpus", SPEC, "--tokenizer", TOKENIZER]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shards = tmp_path / "killed" / "corpora" / "prepared"
    deadline = time.monotonic() + 60
    while not list(shards.glob(".*.partial/shards/*.npz")) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = list(shards.glob(".*.partial/shards/*.npz"))
    assert finished and not list(shards.glob("*/meta.json")), "killed before any shard, or after the end"
    served.slow_down(0)
    served.reset_counters()
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    resumed = prepared_folders()[0]
    for name in ("train.bin", "val.bin", "train.offsets.npy", "val.offsets.npy", "train.counts.npy"):
        assert (resumed / name).read_bytes() == (whole / name).read_bytes(), name
    read_again = sum(served.bytes_served_for(DATASET, name) for name in TRAIN_FILES)
    assert read_again < sum(len(FILES[name]) for name in TRAIN_FILES), "the finished units were read again"
    assert not list(shards.glob(".*.partial"))


def test_redirects_a_rate_limit_and_a_5xx_are_survived_with_the_same_tokens(served, capsys, tmp_path, monkeypatch):
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    plain = prepared_folders()[0]
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "faults"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "faults-hub"))
    served.reset_counters()
    served.redirect_large(0)
    served.rate_limit(3, retry_after=1, path="/datasets/")
    served.fail_once("en/train-1.parquet", 503)
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    again = prepared_folders()[0]
    assert (again / "train.bin").read_bytes() == (plain / "train.bin").read_bytes()
    kinds = {fault for fault, _ in served.faults}
    assert {"rate limited", "failed"} <= kinds and served.cdn_requests
    assert not any(auth for *_, auth in served.cdn_requests), "the CDN saw the token"


def test_training_on_a_hub_dataset_records_its_source_and_tokenizer(served, capsys, tmp_path):
    run_dir = tmp_path / "run"
    options = {"d-model": 16, "n-layers": 1, "n-heads": 2, "seq-len": 16, "batch-size": 4, "steps": 3, "warmup": 1}
    options |= {"log-every": 1, "eval-every": 1, "eval-batches": 1, "checkpoint-every": 3}
    argv = ["train", "--run-dir", str(run_dir), "--corpus", SPEC, "--corpus-config", "en", "--tokenizer", TOKENIZER]
    argv += [item for name, value in options.items() for item in (f"--{name}", str(value))]
    assert dispatch.main(argv) == 0, capsys.readouterr().err
    ds = results.load_dataset(run_dir / "run.nc")
    assert int(ds.step.max()) == 3 and np.isfinite(ds.train_loss.values[1:]).all()
    assert ds.attrs["corpus_dataset"] == DATASET and ds.attrs["corpus_config"] == "en"
    assert len(ds.attrs["corpus_commit"]) == 40 and ds.attrs["tokenizer"] == TOKENIZER
    assert ds.attrs["tokenizer_vocab_size"] == 5 + 1 + len(WORDS)


def test_the_named_corpora_are_listed_with_their_licences(capsys):
    status, out, _ = prepare("--list", capsys=capsys)
    assert status == 0
    for name in ("wikipedia-en", "wikitext-103", "fineweb-edu-10bt", "redpajama-sample", "jigsaw-toxic"):
        assert f"{name}: hf://datasets/" in out
    assert out.count("licence: ") == 5


def test_worker_processes_give_the_same_files(served, capsys, tmp_path, monkeypatch):
    assert prepare(SPEC, "--tokenizer", TOKENIZER, capsys=capsys)[0] == 0
    one = prepared_folders()[0]
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "workers"))
    assert prepare(SPEC, "--tokenizer", TOKENIZER, "--workers", 2, capsys=capsys)[0] == 0
    two = prepared_folders()[0]
    assert one.name == two.name
    for name in ("train.bin", "val.bin", "train.offsets.npy", "val.offsets.npy"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
