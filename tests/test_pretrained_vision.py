"""Pretrained vision transformers (:mod:`attnstruct.analyses.pretrained_vision`): set apart by their registry role,
scored layer by layer, beside notebook 07's runs and the paper's vision rows."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from random_blocks import encoder_blocks

from attnstruct import reference, results
from attnstruct.analyses import nb03_pretrained_models as study
from attnstruct.analyses import paper_comparison
from attnstruct.analyses import pretrained_vision as vision_study
from attnstruct.report import prose
from attnstruct.scores import factor_scores

AUTHORS = reference.reference_table()


def vision_rows(names=("dinov2-s14", "clip-vit-b16-vision")) -> pd.DataFrame:
    rows = [[n, f"/{n}", "zoo", vision_study.VISION_ROLE, 1.0, ""] for n in names]
    return pd.DataFrame(rows, columns=["model", "path", "source", "role", "n_params", "model_type"])


def test_split_vision_moves_the_registrys_vision_encoders_apart_with_their_licence(tmp_path):
    listed = pd.concat([study.checkpoint_list([], [["a", "/p", "encoder"]]), vision_rows()], ignore_index=True)
    others, vision = vision_study.split_vision(listed, cache_dir=tmp_path)
    assert others["model"].tolist() == ["a"] and list(others.columns) == list(listed.columns)
    assert vision["model"].tolist() == ["dinov2-s14", "clip-vit-b16-vision"]
    assert vision["licence"].str.startswith("MIT").all() and not vision["non_commercial"].any()


def test_split_vision_adds_a_non_commercial_vision_checkpoint_only_when_fetched(tmp_path, monkeypatch):
    listed = study.checkpoint_list([], [["a", "/p"]])
    assert vision_study.split_vision(listed, cache_dir=tmp_path)[1].empty
    monkeypatch.setattr(vision_study.zoo, "is_fetched", lambda name, cache=None: name == "swin-b-sdxl-detector")
    vision = vision_study.split_vision(listed, cache_dir=tmp_path)[1]
    assert vision["model"].tolist() == ["swin-b-sdxl-detector"] and vision["non_commercial"].tolist() == [True]
    assert "BY-NC" in vision["licence"].iloc[0]


def scored_vision():
    vision = vision_rows().assign(non_commercial=[False, True])
    blocks = {"dinov2-s14": encoder_blocks(3, 0), "clip-vit-b16-vision": encoder_blocks(2, 1)}
    return vision_study.score_vision(vision, blocks), blocks


def test_score_vision_scores_each_layer_matrix_and_keeps_the_registrys_role():
    ds, blocks = scored_vision()
    assert ds.role.values.tolist() == [vision_study.VISION_ROLE] * 2 and ds.non_commercial.values.tolist() == [
        False,
        True,
    ]
    layer = blocks["clip-vit-b16-vision"][1]
    expected = factor_scores(layer.w_q, layer.w_k, sum_heads=True).symmetry
    assert float(ds.symmetry.sel(model="clip-vit-b16-vision", stack="encoder", layer=1)) == pytest.approx(
        float(expected)
    )
    assert vision_study.score_vision(vision_rows()[:0], {}) is None


def test_vision_layers_are_each_models_layers_against_relative_depth():
    layers = vision_study.vision_layers(scored_vision()[0])
    assert list(zip(layers["model"], layers["layer"])) == [
        ("dinov2-s14", 0),
        ("dinov2-s14", 1),
        ("dinov2-s14", 2),
        ("clip-vit-b16-vision", 0),
        ("clip-vit-b16-vision", 1),
    ]
    assert layers["relative_depth"].tolist() == [0.0, 0.5, 1.0, 0.0, 1.0]
    assert layers["non_commercial"].tolist() == [False] * 3 + [True] * 2


def seven_dataset(learned=((True, True), (True, False))) -> xr.Dataset:
    """A dataset shaped like notebook 07's: scores over (objective, seed, step, layer)."""
    symmetry = np.arange(2 * 2 * 2 * 3, dtype=float).reshape(2, 2, 2, 3) / 100
    dims = ("objective", "seed", "step", "layer")
    return xr.Dataset(
        {
            "symmetry": (dims, symmetry),
            "directionality": (dims, -symmetry),
            "learned": (("objective", "seed"), np.array(learned)),
        },
        coords={"objective": ["classify", "masked"], "seed": [0, 1], "step": [0, 10], "layer": [0, 1, 2]},
        attrs=results.provenance_attrs(parameters={}, scored_matrix="W_qk"),
    )


def test_notebook_07s_layers_are_the_median_over_seeds_at_the_last_step(tmp_path):
    assert vision_study.notebook_07_layers(tmp_path) is None
    results.save_dataset(seven_dataset(), tmp_path / "07_vision.nc")
    runs = vision_study.notebook_07_layers(tmp_path)
    masked = runs[runs["objective"] == "masked"]
    # masked is objective 1; step 10 is index 1: seeds 0 and 1 give 0.15 and 0.21 at layer 0
    assert masked["symmetry"].tolist() == pytest.approx([0.18, 0.19, 0.20])
    assert masked["relative_depth"].tolist() == [0.0, 0.5, 1.0] and masked["seeds"].tolist() == [2] * 3
    assert runs.groupby("objective")["learned"].all().to_dict() == {"classify": True, "masked": False}


def test_the_vision_facts_give_each_models_median_the_runs_and_the_papers_vision_rows(tmp_path):
    layers = vision_study.vision_layers(scored_vision()[0])
    results.save_dataset(seven_dataset(), tmp_path / "07_vision.nc")
    paper = paper_comparison.reported_vision(AUTHORS)
    facts = vision_study.vision_facts(layers, vision_study.notebook_07_layers(tmp_path), paper)
    dino = prose.signed(layers.loc[layers["model"] == "dinov2-s14", "symmetry"].median())
    assert facts.has_vision and facts.symmetry.startswith(f"dinov2-s14 {dino}, clip-vit-b16-vision ")
    assert facts.has_non_commercial and facts.non_commercial == "clip-vit-b16-vision"
    assert facts.has_runs and facts.runs_symmetry == "classify +0.07, masked +0.19"
    assert not facts.all_learned and facts.not_learned == "masked"
    assert facts.paper_rows == prose.count(len(paper), "vision row")
    assert facts.paper_symmetry == prose.signed(paper["symmetry_median"].median())


def test_without_notebook_07s_runs_or_vision_models_the_facts_say_so():
    facts = vision_study.vision_facts(vision_study.vision_layers(scored_vision()[0])[:0], None, REFERENCE_VISION)
    assert not facts.has_vision and not facts.has_runs and not facts.has_non_commercial


REFERENCE_VISION = paper_comparison.reported_vision(AUTHORS)
