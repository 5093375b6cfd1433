"""Pretrained vision transformers (:mod:`attnstruct.analyses.pretrained_vision`): set apart by their registry role,
scored layer by layer, beside the paper's vision rows, and scored for notebook 07 when fetched."""

import extract_models
import numpy as np
import pandas as pd
import pytest
from random_blocks import encoder_blocks

from attnstruct import reference
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


def test_the_vision_facts_give_each_models_median_and_the_papers_vision_rows():
    layers = vision_study.vision_layers(scored_vision()[0])
    paper = paper_comparison.reported_vision(AUTHORS)
    facts = vision_study.vision_facts(layers, paper)
    dino = prose.signed(layers.loc[layers["model"] == "dinov2-s14", "symmetry"].median())
    assert facts.has_vision and facts.symmetry.startswith(f"dinov2-s14 {dino}, clip-vit-b16-vision ")
    assert facts.has_non_commercial and facts.non_commercial == "clip-vit-b16-vision"
    assert facts.paper_rows == prose.count(len(paper), "vision row")
    assert facts.paper_symmetry == prose.signed(paper["symmetry_median"].median())


def test_without_vision_models_the_facts_say_so():
    facts = vision_study.vision_facts(vision_study.vision_layers(scored_vision()[0])[:0], REFERENCE_VISION)
    assert not facts.has_vision and not facts.has_non_commercial


def test_packaged_datasets_score_the_fetched_and_name_the_rest_without_fetching(tmp_path, monkeypatch):
    folder = tmp_path / "dinov2"
    extract_models.build("dinov2").save_pretrained(folder)
    monkeypatch.setattr(vision_study.zoo, "is_fetched", lambda name, cache=None: name == "dinov2-s14")
    monkeypatch.setattr(vision_study.pretrained_scores.zoo, "path", lambda name, cache=None: folder)
    scored, missing = vision_study.packaged_datasets(["clip-vit-b16-vision", "dinov2-s14"], cache_dir=tmp_path)
    assert missing == ["clip-vit-b16-vision"] and [str(ds.model.item()) for ds in scored] == ["dinov2-s14"]
    assert np.isfinite(scored[0].symmetry.sel(stack="encoder").values).all()


REFERENCE_VISION = paper_comparison.reported_vision(AUTHORS)
