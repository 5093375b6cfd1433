"""The vision trainer of notebook 07: images and patches, the causal mask, the objectives, reproducibility."""

import dataclasses

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct import factor_scores
from attnstruct.analyses import nb07_vision as vision_study
from attnstruct.tasks import images as I
from attnstruct.tasks import vision as V
from attnstruct.tasks import vision_config
from attnstruct.training.model import query_key_factors

TINY = dict(
    steps=150,
    batch_size=16,
    lr=3e-3,
    warmup=10,
    log_every=30,
    eval_every=150,
    d_model=32,
    n_layers=2,
    n_heads=2,
    n_images=1000,
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny(objective, **changes):
    return vision_config.VisionConfig(objective=objective, **{**TINY, **changes})


# ---------------------------------------------------------------------------------------------- the model


def test_causal_mask_is_causal():
    config = tiny("next-patch")
    model = V.build_model(config).eval()
    patches = torch.rand(2, config.n_patches, 4, generator=torch.Generator().manual_seed(0))
    base = model(patches, causal=True)
    k = 7
    changed = patches.clone()
    changed[:, k] = torch.rand(2, 4, generator=torch.Generator().manual_seed(1))
    out = model(changed, causal=True)
    # patch k sits at position k + 1: outputs up to position k (which predict patches <= k) are unchanged
    assert torch.equal(out[:, : k + 1], base[:, : k + 1])
    assert (out[:, k + 1 :] - base[:, k + 1 :]).abs().amax(-1).min() > 0
    # the same model without the causal mask lets the change reach every position
    assert (model(changed) - model(patches)).abs().amax(-1).min() > 0


def test_objectives_share_the_initial_trunk():
    models = [V.build_model(tiny(o)) for o in vision_config.OBJECTIVES]
    for other in models[1:]:
        for (name, a), b in zip(models[0].named_parameters(), other.parameters()):
            if not name.startswith("head_out"):
                assert torch.equal(a, b), name
    assert not torch.equal(
        query_key_factors(models[0])[0], query_key_factors(V.build_model(tiny("classify", seed=1)))[0]
    )


def test_masked_inputs_hide_the_masked_patches():
    config = tiny("masked")
    model = V.build_model(config).eval()
    data = I.load_images("synthetic-digits", config.n_images, config.val_fraction)
    batch = V.training_batch(config, data, 1)
    assert batch.mask.any(1).all()
    scrambled = torch.where(batch.mask[..., None], torch.rand(batch.patches.shape), batch.patches)
    assert torch.equal(model.hidden(scrambled, batch.mask, False), model.hidden(batch.patches, batch.mask, False))


def _gradients(objective, **changes):
    """One image's loss gradient: w.r.t. the encoder's output at every position ``[T]`` (norm per position),
    the patch embeddings ``[T-1]``, and the query weights of the first and the last block."""
    config = tiny(objective, n_layers=3, **changes)
    model = V.build_model(config).double()
    data = I.load_images("synthetic-digits", config.n_images, config.val_fraction)
    batch = V.training_batch(config, data, 1).rows(0, config.batch_size)  # one image
    batch = V.Batch(batch.patches.double(), batch.labels, batch.mask)
    kept = {}

    def keep(name):
        def hook(module, inputs, output):
            output.retain_grad()
            kept[name] = output

        return hook

    model.encoder.register_forward_hook(keep("out"))
    model.patch.register_forward_hook(keep("patch"))
    total, _ = V.summed_loss(model, batch, objective)
    total.backward()
    per_position = kept["out"].grad[0].norm(dim=-1)
    per_patch = kept["patch"].grad[0].norm(dim=-1)
    queries = [model.encoder.blocks[i].attention.query.weight.grad for i in (0, -1)]
    return per_position, per_patch, queries


def _rank(matrix, tolerance=1e-9):
    s = torch.linalg.svdvals(matrix)
    return int((s > tolerance * s[0]).sum())


def test_classify_has_one_query_in_the_last_layer_and_classify_mean_reaches_every_token():
    # classify: only the [CLS] output (position 0) reaches the loss; in the last layer the query weights'
    # gradient is then one outer product (one query), while every token still gets gradient below it
    out, patches, (first, last) = _gradients("classify")
    assert out[0] > 0 and torch.all(out[1:] == 0)
    assert torch.all(patches > 0)  # every token's embedding reaches the loss, through [CLS]'s attention
    assert _rank(last) == 1
    assert _rank(first) > 1  # below the last layer every token is a query
    # classify-mean: every position's output reaches the loss, every token is a query in every layer
    out, patches, (first, last) = _gradients("classify-mean")
    assert torch.all(out > 0) and torch.all(patches > 0)
    assert _rank(last) > 1 and _rank(first) > 1
    assert torch.allclose(out, out[0])  # the mean weighs every position's output alike


def test_classify_mean_shapes():
    config = tiny("classify-mean")
    model = V.build_model(config)
    data = I.load_images("synthetic-digits", config.n_images, config.val_fraction)
    batch = V.training_batch(config, data, 3)
    logits, targets = V.logits_and_targets(model, batch, "classify-mean")
    assert logits.shape == (config.batch_size, 10) and targets.shape == (config.batch_size,)
    assert batch.mask is None
    assert model.head_out.out_features == 10
    with pytest.raises(ValueError, match="classification objective"):
        V.accuracy(model, [batch], "cpu", "masked")


# ---------------------------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def tiny_runs():
    return {o: V.train(tiny(o)) for o in vision_config.OBJECTIVES}


@pytest.mark.parametrize("objective", vision_config.OBJECTIVES)
def test_losses_decrease(tiny_runs, objective):
    ds = tiny_runs[objective]
    val = ds.val_loss.dropna("step")
    assert list(val.step.values) == [0, 150]
    # classification starts slowly; the pixel objectives fall fast
    assert float(val[-1]) < (0.97 if objective in V.CLASSIFIERS else 0.85) * float(val[0])
    assert float(ds.train_loss[-1]) < float(ds.train_loss[1])
    if objective in V.CLASSIFIERS:
        assert float(ds.val_accuracy[-1]) > 0.12  # chance is 0.1
    else:
        assert ds.val_accuracy.isnull().all()


def test_same_config_gives_identical_dataset(tiny_runs):
    again = V.train(tiny("masked"))
    xr.testing.assert_equal(again, tiny_runs["masked"])
    assert again.attrs["parameters"] == tiny_runs["masked"].attrs["parameters"]
    other_seed = V.train(dataclasses.replace(tiny("masked"), seed=1, steps=30, eval_every=30))
    assert not np.array_equal(other_seed.symmetry.values, tiny_runs["masked"].symmetry.sel(step=[0, 30]).values)


def test_scores_are_those_of_the_final_model():
    config = tiny("next-patch", steps=30, eval_every=30)
    final = {}

    def keep(step, model):
        if step == config.steps:
            final["factors"] = query_key_factors(model)

    ds = V.train(config, callback=keep)
    w_q, w_k = final["factors"]
    layer = factor_scores(w_q, w_k, sum_heads=True)
    head = factor_scores(w_q, w_k)
    last = ds.isel(step=-1)
    np.testing.assert_array_equal(last.symmetry.values, layer.symmetry.numpy())
    np.testing.assert_array_equal(last.directionality.values, layer.directionality.numpy())
    np.testing.assert_array_equal(last.head_symmetry.values, head.symmetry.numpy())
    np.testing.assert_array_equal(last.head_directionality.values, head.directionality.numpy())
    assert ds.attrs["objective"] == "next-patch" and ds.attrs["score_convention"] == "paper"


@pytest.mark.training
def test_train_many_in_processes_matches_one_process(tmp_path):
    configs = [tiny(o, steps=30, eval_every=30) for o in ("classify", "next-patch")]
    parallel = V.train_many(configs, tmp_path / "runs", workers=2, progress=False)
    serial = V.combine([V.train(c) for c in configs])
    xr.testing.assert_equal(parallel, serial)
    assert parallel.symmetry.dims == ("objective", "seed", "step", "layer")
    assert parallel.head_symmetry.dims == ("objective", "seed", "step", "layer", "head")
    assert list(parallel.objective.values) == ["classify", "next-patch"]
    assert parallel.causal.values.tolist() == [False, True]
    folder = tmp_path / "runs" / f"classify-seed0-{configs[0].digest()[:8]}"
    assert (folder / "run.nc").is_file()
    reused = V.train_many(configs, tmp_path / "runs", workers=1, progress=False)  # read back, not retrained
    xr.testing.assert_equal(reused, parallel)
    with pytest.raises(ValueError, match="other parameters"):
        V.train(dataclasses.replace(configs[0], lr=1e-4), folder)


# ---------------------------------------------------------------------------------------------- summaries


def test_facts_from_tiny_runs(tiny_runs):
    runs = V.combine(list(tiny_runs.values()))
    data = I.load_images("sklearn-digits", TINY["n_images"], 0.2)
    baselines = vision_study.context_free_losses(data, vision_config.OBJECTIVES, 4)
    learning = vision_study.learning_table(vision_study.final_summary(runs), baselines)
    facts = vision_study.learning_by_objective(learning, levels=4)
    assert [f.objective for f in facts] == list(vision_config.OBJECTIVES)
    assert [f.uniform for f in facts] == ["2.30", "2.30", "1.39", "1.39"]
    assert [f.classifier for f in facts] == [o in V.CLASSIFIERS for o in vision_config.OBJECTIVES]
    assert [f.objective for f in vision_study.trajectories(runs)] == list(vision_config.OBJECTIVES)
    assert [f.other for f in vision_study.unpredicted(vision_study.final_summary(runs))] == [
        "masked",
        "next-patch",
        "classify-mean",
    ]


def test_final_summary(tiny_runs):
    runs = V.combine(list(tiny_runs.values()))
    table = vision_study.final_summary(runs)
    assert list(table.objective) == list(vision_config.OBJECTIVES)
    row = table[table.objective == "masked"].iloc[0]
    assert row.symmetry_median == pytest.approx(float(np.median(tiny_runs["masked"].symmetry.isel(step=-1))))
    assert row.symmetry_last == float(tiny_runs["masked"].symmetry.isel(step=-1, layer=-1))
    assert table.set_index("objective").val_accuracy.notna().to_dict() == {
        o: o in V.CLASSIFIERS for o in vision_config.OBJECTIVES
    }


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"objective": "contrastive"},
            "unknown objective 'contrastive'; choose one of classify, classify-mean, masked, next-patch",
        ),
        ({"patch_size": 3}, "patch_size 3 does not divide the image size 8"),
        ({"levels": 1}, "levels must be an integer in \\[2, 17\\]"),
        ({"mask_rate": 1.0}, "mask_rate must be in \\(0, 1\\)"),
        ({"steps": 0}, "steps must be a positive integer"),
        ({"eval_every": 45}, "eval_every \\(45\\) must be a multiple of log_every \\(30\\)"),
        ({"n_heads": 3}, "d_model 32 is not a multiple of n_heads 3"),
        ({"source": "imagenet"}, "unknown image source 'imagenet'"),
        ({"lr": -1.0}, "lr must be a positive number"),
    ],
)
def test_bad_config_is_one_line_value_error(changes, message):
    with pytest.raises(ValueError, match=message) as err:
        vision_config.VisionConfig(**{**TINY, **changes})
    assert "\n" not in str(err.value)


def test_other_bad_input():
    with pytest.raises(ValueError, match="unknown vision training parameters: colour"):
        vision_config.VisionConfig.from_dict({"colour": 1})
    with pytest.raises(ValueError, match="same objective and seed"):
        V.train_many([tiny("classify"), tiny("classify")], workers=1)
    with pytest.raises(ValueError, match="no runs"):
        V.combine([])
    model = V.build_model(tiny("classify"))
    with pytest.raises(ValueError, match="patches must be"):
        model(torch.zeros(2, 16, 9))
