"""The vision trainer of notebook 07: images and patches, the causal mask, the objectives, reproducibility."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr

from attnstruct import factor_scores
from attnstruct import images as I
from attnstruct import vision as V
from attnstruct.transformer import query_key_factors

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
    return V.VisionConfig(objective=objective, **{**TINY, **changes})


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
    models = [V.build_model(tiny(o)) for o in V.OBJECTIVES]
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


# ---------------------------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def tiny_runs():
    return {o: V.train(tiny(o)) for o in V.OBJECTIVES}


@pytest.mark.parametrize("objective", V.OBJECTIVES)
def test_losses_decrease(tiny_runs, objective):
    ds = tiny_runs[objective]
    val = ds.val_loss.dropna("step")
    assert list(val.step.values) == [0, 150]
    # classification from [CLS] starts slowly; the pixel objectives fall fast
    assert float(val[-1]) < (0.97 if objective == "classify" else 0.85) * float(val[0])
    assert float(ds.train_loss[-1]) < float(ds.train_loss[1])
    if objective == "classify":
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
    np.testing.assert_array_equal(last.symmetry_head.values, head.symmetry.numpy())
    np.testing.assert_array_equal(last.directionality_head.values, head.directionality.numpy())
    assert ds.attrs["objective"] == "next-patch" and ds.attrs["score_convention"] == "paper"


def test_train_many_in_processes_matches_one_process(tmp_path):
    configs = [tiny(o, steps=30, eval_every=30) for o in ("classify", "next-patch")]
    parallel = V.train_many(configs, tmp_path / "runs", workers=2, progress=False)
    serial = V.combine([V.train(c) for c in configs])
    xr.testing.assert_equal(parallel, serial)
    assert parallel.symmetry.dims == ("objective", "seed", "step", "layer")
    assert parallel.symmetry_head.dims == ("objective", "seed", "step", "layer", "head")
    assert list(parallel.objective.values) == ["classify", "next-patch"]
    assert parallel.causal.values.tolist() == [False, True]
    assert (tmp_path / "runs" / "classify-seed0" / "run.nc").is_file()
    reused = V.train_many(configs, tmp_path / "runs", workers=1, progress=False)  # read back, not retrained
    xr.testing.assert_equal(reused, parallel)
    with pytest.raises(ValueError, match="other parameters"):
        V.train(dataclasses.replace(configs[0], lr=1e-4), tmp_path / "runs" / "classify-seed0")


# ---------------------------------------------------------------------------------------------- summaries


def summary_of(values):
    return pd.DataFrame(
        [
            {"objective": o, "seed": s, "causal": V.CAUSAL[o], "symmetry_median": v}
            for o, per_seed in values.items()
            for s, v in enumerate(per_seed)
        ]
    )


def test_compare_objectives_says_yes_or_no_from_the_numbers():
    yes, text = V.compare_objectives(
        summary_of({"classify": [0.2, 0.3], "masked": [0.4, 0.5], "next-patch": [0.1, 0.15]})
    )
    assert yes and text.startswith("Yes:")
    no, text = V.compare_objectives(
        summary_of({"classify": [0.2, 0.1], "masked": [0.4, 0.5], "next-patch": [0.1, 0.15]})
    )
    assert not no and text.startswith("No:")
    assert "classify: 1 of 2 runs at or below" in text and "masked: every run above" in text
    with pytest.raises(ValueError, match="causal"):
        V.compare_objectives(summary_of({"classify": [0.2], "masked": [0.4]}))


def test_final_summary(tiny_runs):
    runs = V.combine(list(tiny_runs.values()))
    table = V.final_summary(runs)
    assert list(table.objective) == list(V.OBJECTIVES)
    row = table[table.objective == "masked"].iloc[0]
    assert row.symmetry_median == pytest.approx(float(np.median(tiny_runs["masked"].symmetry.isel(step=-1))))


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"objective": "contrastive"}, "unknown objective 'contrastive'; choose one of classify, masked, next-patch"),
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
        V.VisionConfig(**{**TINY, **changes})
    assert "\n" not in str(err.value)


def test_other_bad_input():
    with pytest.raises(ValueError, match="unknown vision training parameters: colour"):
        V.VisionConfig.from_dict({"colour": 1})
    with pytest.raises(ValueError, match="same objective and seed"):
        V.train_many([tiny("classify"), tiny("classify")], workers=1)
    with pytest.raises(ValueError, match="no runs"):
        V.combine([])
    model = V.build_model(tiny("classify"))
    with pytest.raises(ValueError, match="patches must be"):
        model(torch.zeros(2, 16, 9))
