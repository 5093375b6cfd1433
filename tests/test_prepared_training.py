"""Training on a prepared token corpus: which sources take that path, the memory-mapped windows drawn from
``(seed, step)`` as from the plays, the unigram entropy and mask id from the folder, the random tokens from the
whole vocabulary, the corpus metadata in the run's dataset, and ``attnstruct train`` on a prepared corpus."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from attnstruct import results
from attnstruct.tasks import plays_and_text_files, prepared_corpus, text, text_config
from attnstruct.training import engine

pytestmark = pytest.mark.usefixtures("one_torch_thread")

VOCAB = 60
MASK = 3
META = {
    "source": {
        "spec": "hf://datasets/org/prose@main",
        "dataset": "org/prose",
        "config": "en",
        "split": "train",
        "field": "text",
        "revision": "main",
        "commit": "a" * 40,
        "files": ["en/train-00000.parquet"],
    },
    "tokenizer": {"spec": "org/tok", "digest": "b" * 64, "vocab_size": VOCAB},
}


def write_prepared(folder, train, val, *, vocab_size=VOCAB, mask_id=MASK, tokenizer=None, documents=(3, 1)):
    """A prepared corpus folder in format ``attnstruct-tokens/1`` holding the token ids ``train`` and ``val``
    (each split ``documents`` documents of about equal length)."""
    folder.mkdir(parents=True)
    dtype = np.dtype(np.uint16 if vocab_size < 1 << 16 else np.uint32).newbyteorder("<")
    for split, ids, n in (("train", train, documents[0]), ("val", val, documents[1])):
        ids = np.asarray(ids, dtype=dtype)
        ids.tofile(folder / f"{split}.bin")
        np.save(folder / f"{split}.offsets.npy", np.linspace(0, len(ids), n + 1).astype(np.int64))
    np.save(folder / "train.counts.npy", np.bincount(np.asarray(train), minlength=vocab_size).astype(np.int64))
    meta = {
        "format": "attnstruct-tokens/1",
        "dtype": dtype.name,
        "vocab_size": vocab_size,
        "mask_id": mask_id,
        "pad_id": 0,
        "special_ids": [0, 1, 2, 3],
        "tokens": {"train": len(train), "val": len(val)},
        "documents": {"train": documents[0], "val": documents[1]},
        **META,
        "tokenizer": {**META["tokenizer"], **(tokenizer or {})},
        "preprocessing": "none",
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


@pytest.fixture(scope="module")
def ids():
    rng = np.random.default_rng(0)
    return rng.integers(4, VOCAB, 20_000), rng.integers(4, VOCAB, 2_000)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, ids):
    return write_prepared(tmp_path_factory.mktemp("prepared") / "corpus", *ids)


def tiny(corpus_spec, **changes) -> text_config.TextConfig:
    values = dict(corpus=str(corpus_spec), d_model=16, n_layers=2, n_heads=2, seq_len=16, batch_size=8, steps=4)
    values.update(warmup=1, log_every=2, eval_every=2, eval_batches=1, checkpoint_every=4)
    return text_config.TextConfig(**{**values, **changes})


def test_which_sources_are_prepared_corpora(tmp_path, prepared):
    (tmp_path / "rows.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "plain.txt").write_text("a\n")
    assert text_config.takes_text_path("shakespeare") and text_config.takes_text_path(tmp_path / "plain.txt")
    assert text_config.takes_text_path("missing.txt")  # its error: no file
    assert text_config.takes_text_path("some/where")  # its error: no file
    for source in ("hf://datasets/org/prose", "wikitext-103", tmp_path / "rows.jsonl", tmp_path, prepared):
        assert not text_config.takes_text_path(source), source
    is_prepared = prepared_corpus.is_prepared
    assert is_prepared(prepared) and not is_prepared(tmp_path) and not is_prepared("x")
    assert not text_config.TextConfig().prepared and not tiny(tmp_path / "plain.txt").prepared
    assert tiny(tmp_path / "plain.txt", tokenizer="org/tok").prepared and tiny(prepared).prepared
    assert text_config.TextConfig(max_tokens=10).prepared  # the plays with an option of a prepared corpus


def test_a_prepared_corpus_is_read_by_memory_map_and_drawn_like_a_tensor(prepared, ids):
    task = text.TextTask(tiny(prepared, objective="next-token", batch_size=32))
    data = task.data
    assert isinstance(data, plays_and_text_files.MappedTokens) and isinstance(data.train, np.memmap)
    assert not data.train.flags.writeable and data.train.dtype == np.dtype("<u2") and len(data.train) == 20_000
    assert data.vocab_size == VOCAB and data.mask_id == MASK and data.random_tokens == (0, VOCAB)
    tensor = torch.from_numpy(ids[0].astype(np.int64))
    for step in (1, 7):
        windows = text.draw_windows(tensor, 32, 17, engine.seeded_generator(0, step))
        batch = task.batch(step)
        assert batch.inputs.dtype == torch.int64
        assert torch.equal(batch.inputs, windows[:, :-1]) and torch.equal(batch.targets, windows[:, 1:].reshape(-1))
    assert text.TextTask(tiny(prepared, objective="next-token", batch_size=32)).batch(7).inputs.equal(batch.inputs)
    assert "data" not in pickle.loads(pickle.dumps(task)).__dict__  # a spawned worker maps the files itself
    assert task.build_model().token.num_embeddings == VOCAB


def test_the_unigram_entropy_comes_from_the_counts_and_matches_the_tokens(prepared, ids):
    data = text.TextTask(tiny(prepared)).data
    expected = plays_and_text_files.unigram_entropy(torch.from_numpy(ids[0]), VOCAB)
    assert data.unigram_entropy() == pytest.approx(expected, rel=1e-12) and 3.9 < expected < np.log(VOCAB)


def test_masked_lm_on_a_prepared_corpus_masks_with_its_id_and_draws_random_tokens_from_every_id(prepared, ids):
    config = tiny(prepared, batch_size=256, seq_len=64)
    task = text.TextTask(config)
    batch = task.batch(3)
    windows = text.draw_windows(torch.from_numpy(ids[0]), 256, 65, engine.seeded_generator(0, 3))[:, :-1]
    selected = batch.selected
    assert torch.equal(batch.targets, windows[selected])
    assert abs(float((batch.inputs[selected] == MASK).float().mean()) - 0.8) < 0.03
    replaced = batch.inputs[selected & (batch.inputs != MASK) & (batch.inputs != windows)]
    assert len(replaced) > 150 and int(replaced.min()) >= 0 and int(replaced.max()) < VOCAB
    assert (replaced < 4).any()  # ids below the first text token: the whole vocabulary, as Hugging Face's collator
    assert torch.equal(batch.positions, selected.reshape(-1).nonzero()[:, 0])


def test_masked_lm_with_a_tokenizer_without_a_mask_token_is_a_one_line_error(tmp_path, ids):
    folder = write_prepared(tmp_path / "nomask", *ids, mask_id=None)
    for objective in ("mlm", "next-token-mlm-collator"):
        with pytest.raises(ValueError, match=f"objective '{objective}' needs a mask token; tokenizer 'org/tok' has"):
            text.TextTask(tiny(folder, objective=objective)).prepare()
    text.TextTask(tiny(folder, objective="next-token")).prepare()


def test_a_run_on_a_prepared_corpus_records_the_corpus_and_tokenizer(prepared, tmp_path):
    ds = text.train(tiny(prepared), tmp_path / "run")
    attrs = ds.attrs
    assert attrs["corpus"] == "hf://datasets/org/prose@main" and attrs["corpus_dataset"] == "org/prose"
    assert (attrs["corpus_config"], attrs["corpus_split"], attrs["corpus_field"]) == ("en", "train", "text")
    assert attrs["corpus_commit"] == "a" * 40 and attrs["corpus_revision"] == "main"
    assert attrs["tokenizer"] == "org/tok" and attrs["tokenizer_digest"] == "b" * 64
    assert attrs["tokenizer_vocab_size"] == VOCAB and attrs["corpus_format"] == "attnstruct-tokens/1"
    assert attrs["corpus_tokens"] == "20000 train / 2000 validation"
    assert json.loads(attrs["corpus_documents"]) == {"train": 3, "val": 1}
    assert np.isfinite(ds.val_loss.sel(step=4)) and (tmp_path / "run" / "run.nc").is_file()
    results.check_dataset(ds)  # every attr is one netCDF stores


def test_a_hub_spec_is_prepared_with_the_runs_options_once_per_process(prepared, monkeypatch, tmp_path):
    calls = []

    def prepare(source, tokenizer, **options):
        calls.append((source, tokenizer, options))
        return prepared_corpus.open_prepared(prepared)

    monkeypatch.setattr(prepared_corpus, "prepare", prepare)
    spec = "hf://datasets/org/prose"
    options = dict(corpus_config="en", corpus_split="train", corpus_field="body", max_tokens=5000)
    config = tiny(spec, tokenizer="org/tok", preprocessing="as-authors", **options)
    data = text.TextTask(config, cache=tmp_path).data
    assert text.TextTask(config, cache=tmp_path).data is data
    keywords = dict(config="en", split="train", field="body", max_tokens=5000, preprocessing="as-authors")
    assert calls == [(spec, "org/tok", {**keywords, "val_fraction": 0.05, "cache": tmp_path})]
    text.TextTask(tiny(spec, seed=1), cache=tmp_path).prepare()
    assert calls[-1][1] == "bpe:500"  # the BPE trained here, of the run's vocabulary


def test_bad_prepared_corpus_options_are_one_line_errors(prepared, tmp_path):
    with pytest.raises(ValueError, match="was prepared with tokenizer 'org/tok', not 'other/tok'"):
        text.TextTask(tiny(prepared, tokenizer="other/tok")).prepare()
    with pytest.raises(ValueError, match="is a prepared folder: corpus_split, max_tokens do not apply"):
        text.TextTask(tiny(prepared, corpus_split="test", max_tokens=9)).prepare()
    with pytest.raises(ValueError, match="the packaged corpus 'shakespeare' takes the BPE trained here"):
        text.TextTask(text_config.TextConfig(tokenizer="org/tok"), cache=tmp_path).prepare()
    with pytest.raises(ValueError, match="unknown preprocessing 'lower'"):
        text_config.TextConfig(preprocessing="lower")
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        text_config.TextConfig(max_tokens=0)
    with pytest.raises(ValueError, match="corpus_config must be a string or None"):
        text_config.TextConfig(corpus_config=3)


def test_the_corpus_options_are_left_out_of_the_record_at_their_defaults():
    assert set(text_config.CORPUS_OPTIONS).isdisjoint(text_config.TextConfig().to_dict())
    config = text_config.TextConfig(tokenizer="org/tok", corpus_split="train")
    assert config.to_dict()["tokenizer"] == "org/tok" and config.to_dict()["corpus_split"] == "train"
    assert (
        text_config.TextConfig.from_dict(config.to_dict()) == config
        and config.digest() != text_config.TextConfig().digest()
    )


def write_jsonl(path, n=300):
    rng = np.random.default_rng(1)
    words = "the king is dead long live the king and all his men stood upon the wall at dawn".split()
    path.write_text("".join(json.dumps({"text": " ".join(rng.choice(words, 40))}) + "\n" for _ in range(n)))
    return path


def test_a_jsonl_file_is_prepared_with_a_bpe_and_trained_on(tmp_path):
    source = write_jsonl(tmp_path / "rows.jsonl")
    config = tiny(source, vocab_size=300, val_fraction=0.1)
    task = text.TextTask(config, cache=tmp_path / "cache")
    task.prepare()
    meta = task.data.meta
    assert meta["tokenizer"]["spec"] == "bpe:300" and task.data.vocab_size == 300 and task.data.mask_id is not None
    assert len(task.data.train) > 10 * len(task.data.val) > 0
    ds = text.train(config, cache=tmp_path / "cache")
    assert ds.attrs["corpus_tokens"] == f"{len(task.data.train)} train / {len(task.data.val)} validation"
    assert float(ds.val_loss.sel(step=4)) < float(ds.val_loss.sel(step=0))


@pytest.mark.training
def test_the_command_line_trains_on_a_prepared_corpus_with_a_tokenizer_file(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    source = write_jsonl(tmp_path / "rows.jsonl")
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[MASK]"])
    tokenizer.train_from_iterator([json.loads(line)["text"] for line in source.read_text().splitlines()], trainer)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    args = [sys.executable, "-m", "attnstruct.cli.train", "--run-dir", str(tmp_path / "run"), "--threads", "1"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--corpus", str(source)]
    args += ["--tokenizer", str(tmp_path / "tokenizer.json")]
    args += ["--corpus-config", "none", "--max-tokens", "9000", "--val-fraction", "0.1", "--d-model", "16"]
    args += ["--n-layers", "1", "--n-heads", "2", "--seq-len", "16", "--batch-size", "8", "--accumulate", "2"]
    args += ["--steps", "4", "--warmup", "1", "--log-every", "2", "--eval-every", "2", "--eval-batches", "1"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 steps" in done.stdout
    ds = results.load_dataset(tmp_path / "run" / "run.nc")
    parameters = json.loads(ds.attrs["parameters"])
    assert parameters["accumulate"] == 2 and parameters["max_tokens"] == 9000 and "corpus_config" not in parameters
    assert ds.attrs["tokenizer"].endswith("tokenizer.json") and len(ds.attrs["tokenizer_digest"]) == 64
    train, val = (int(part.split()[0]) for part in ds.attrs["corpus_tokens"].split("/"))
    assert ds.attrs["tokenizer_vocab_size"] == tokenizer.get_vocab_size() and train + val == 9000


@pytest.mark.parametrize(
    "tamper, says",
    [
        (lambda f, m: (f / "meta.json").write_text("[1]"), "not an object"),
        (lambda f, m: (f / "meta.json").write_text(json.dumps({k: v for k, v in m.items() if k != "dtype"})), "dtype"),
        (lambda f, m: (f / "meta.json").write_text(json.dumps({**m, "dtype": "object"})), "not uint16 or uint32"),
        (lambda f, m: (f / "meta.json").write_text(json.dumps({**m, "tokens": 5})), "not a readable"),
        (lambda f, m: np.save(f / "val.offsets.npy", np.array([{"a": 1}], dtype=object)), "pickle"),
        (lambda f, m: np.save(f / "val.offsets.npy", np.zeros(0, np.int64)), "disagree"),
    ],
    ids=["meta-a-list", "no-dtype", "object-dtype", "tokens-a-number", "pickled-offsets", "no-offsets"],
)
def test_a_tampered_prepared_folder_is_one_line_naming_it(prepared, tmp_path, tamper, says):
    import shutil

    folder = shutil.copytree(prepared, tmp_path / "corpus")
    tamper(folder, json.loads((folder / "meta.json").read_text()))
    with pytest.raises(prepared_corpus.CorpusError, match=says) as refused:
        prepared_corpus.open_prepared(folder)
    assert str(folder) in str(refused.value) and "\n" not in str(refused.value)
