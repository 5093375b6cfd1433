"""Gradient accumulation: a step in ``accumulate`` micro-batches is the step on the whole global batch (dropout 0,
to float32 rounding), for masked LM, next-token and a vision objective; a run's records do not depend on it; the
batch must split evenly; under DDP each rank's rows are split again (two gloo processes against one)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct.tasks import text, text_config, vision_config
from attnstruct.tasks import vision as V
from attnstruct.training import engine

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WORDS = "the king is dead long live the king and all his men who stood upon the wall at dawn to see".split()


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("text") / "tiny.txt"
    path.write_text("\n".join(" ".join(rng.choice(WORDS, size=12)) for _ in range(1200)) + "\n")
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def tiny(text_file, **changes) -> text_config.TextConfig:
    values = dict(corpus=str(text_file), vocab_size=300, d_model=32, n_layers=2, n_heads=2, seq_len=16, batch_size=8)
    values.update(steps=6, warmup=2, log_every=2, eval_every=2, eval_batches=2, checkpoint_every=6, dropout=0.0)
    return text_config.TextConfig(**{**values, **changes})


def one_step(task):
    """Parameters after one step of ``task`` on the batch of step 1, the gradients it stepped on, and its loss."""
    config = task.config
    model = task.build_model()
    start = [p.detach().clone() for p in model.parameters()]
    optimizer, scheduler = engine.build_optimizer(config, model)
    gradients = []

    def keep(*_):
        gradients.extend(torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.parameters())

    optimizer.register_step_pre_hook(keep)
    step = engine.Step(engine.Objective(task, model), model, optimizer, scheduler, config, torch.device("cpu"))
    loss = step(task.batch(1), 1)
    moved = max(float((p.detach() - p0).abs().max()) for p, p0 in zip(model.parameters(), start))
    assert moved > 1e-4  # the step moved the weights (by about the learning rate)
    return [p.detach().clone() for p in model.parameters()], gradients, float(loss)


def assert_same_step(whole, parts) -> None:
    (params, grads, loss), (params_k, grads_k, loss_k) = whole, parts
    scale = max(float(g.abs().max()) for g in grads)
    grad_error = max(float((a - b).abs().max()) for a, b in zip(grads, grads_k))
    assert grad_error <= 2e-6 * scale, (grad_error, scale)  # measured <= 4.3e-7 of the largest gradient
    assert max(float((a - b).abs().max()) for a, b in zip(params, params_k)) <= 5e-6  # measured <= 1.4e-6
    assert loss_k == pytest.approx(loss, rel=1e-6)  # measured equal for mlm and next-token, 1.7e-7 otherwise


@pytest.mark.parametrize("objective", ["mlm", "next-token", "next-token-mlm-collator"])
@pytest.mark.parametrize("parts", [2, 4])
def test_a_step_in_micro_batches_is_the_step_on_the_whole_batch(text_file, cache, objective, parts):
    whole = text.TextTask(tiny(text_file, objective=objective), cache)
    split = text.TextTask(tiny(text_file, objective=objective, accumulate=parts), cache)
    batch = whole.batch(1)
    assert torch.equal(split.batch(1).inputs, batch.inputs)  # the global batch does not depend on accumulate
    pieces = [batch.rows(i, parts) for i in range(parts)]
    assert sum(len(p.targets) for p in pieces) == len(batch.targets)
    assert torch.equal(torch.cat([p.targets for p in pieces]).sort().values, batch.targets.sort().values)
    assert_same_step(one_step(whole), one_step(split))


def test_a_vision_step_in_micro_batches_is_the_step_on_the_whole_batch():
    config = dict(source="synthetic-digits", n_images=100, batch_size=8, d_model=16, n_layers=2, n_heads=2, steps=5)
    config.update(log_every=5, eval_every=5, checkpoint_every=5, warmup=1)
    for objective in ("masked", "classify"):
        whole = V.VisionTask(vision_config.VisionConfig(objective=objective, **config))
        split = V.VisionTask(vision_config.VisionConfig(objective=objective, accumulate=4, **config))
        assert_same_step(one_step(whole), one_step(split))


# Largest absolute differences over 6 steps with 2 or 8 micro-batches, measured: losses 4.8e-7, symmetry 1.8e-8,
# directionality 1.8e-6.
TOLERANCE = {"train_loss": 2e-6, "val_loss": 2e-6, "symmetry": 1e-7, "head_symmetry": 1e-7, "directionality": 1e-5}


@pytest.mark.parametrize("objective", ["mlm", "next-token"])
def test_a_run_in_micro_batches_records_what_the_run_without_records(text_file, cache, objective):
    runs = {k: text.train(tiny(text_file, objective=objective, accumulate=k), cache=cache) for k in (1, 2, 8)}
    assert runs[2].attrs["run_key"] != runs[1].attrs["run_key"]
    for k in (2, 8):
        assert list(runs[k].step.values) == [0, 2, 4, 6]
        for name, atol in TOLERANCE.items():
            np.testing.assert_allclose(runs[k][name], runs[1][name], rtol=0, atol=atol, err_msg=name)
    assert not np.allclose(runs[1].symmetry.isel(step=-1), runs[1].symmetry.isel(step=0))  # they trained


def test_micro_batches_of_a_ranks_rows_are_rows_of_the_global_batch(text_file, cache):
    batch = text.TextTask(tiny(text_file, batch_size=12), cache).batch(3)
    for rank in range(2):
        for i in range(3):
            part, direct = batch.rows(rank, 2).rows(i, 3), batch.rows(rank + 2 * i, 6)
            assert torch.equal(part.inputs, direct.inputs) and torch.equal(part.targets, direct.targets)
            assert torch.equal(part.positions, part.selected.reshape(-1).nonzero()[:, 0])


def test_the_batch_must_split_into_micro_batches_and_processes(text_file, cache, monkeypatch):
    with pytest.raises(ValueError, match="^batch_size 10 is not divisible into 4 micro-batches$"):
        tiny(text_file, batch_size=10, accumulate=4)
    with pytest.raises(ValueError, match="accumulate must be a positive integer"):
        tiny(text_file, accumulate=0)
    monkeypatch.setattr(engine, "distributed", lambda: (0, 3))
    with pytest.raises(ValueError, match="^batch_size 8 is not divisible by the 3 processes x 2 micro-batches$"):
        text.train(tiny(text_file, accumulate=2), cache=cache)


def test_accumulate_is_recorded_only_when_it_is_not_one(text_file):
    assert "accumulate" not in tiny(text_file).to_dict() and tiny(text_file, accumulate=2).to_dict()["accumulate"] == 2
    assert text_config.TextConfig.from_dict(tiny(text_file, accumulate=2).to_dict()) == tiny(text_file, accumulate=2)


@pytest.mark.training
def test_two_gloo_processes_with_micro_batches_match_one_process_without(text_file, cache, tmp_path):
    """Each of two ranks takes 4 of the 8 rows and steps on them in 2 micro-batches of 2."""
    config = tiny(text_file, steps=4, eval_every=2, checkpoint_every=4)
    single = text.train(config, tmp_path / "one", cache=cache)
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    args += ["-m", "attnstruct.cli.train", "--run-dir", str(tmp_path / "two"), "--cache-dir", str(cache), "--threads=1"]
    args += [f"--{k.replace('_', '-')}={v}" for k, v in config.to_dict().items()] + ["--accumulate=2"]
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    double = xr.open_dataset(tmp_path / "two" / "run.nc").load()
    assert double.attrs["processes"] == 2 and '"accumulate": 2' in double.attrs["parameters"]
    xr.testing.assert_allclose(single.drop_attrs(), double.drop_attrs(), rtol=1e-4, atol=1e-5)
