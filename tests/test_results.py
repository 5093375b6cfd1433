"""Datasets carry provenance, round-trip through netCDF, and are written atomically."""

import json

import numpy as np
import pytest
import xarray as xr

from attnstruct import results


def make_dataset(**params):
    attrs = results.provenance_attrs(
        parameters={"seed": 0, "d_models": [64, 128], **params}, scored_matrix="test matrix"
    )
    return xr.Dataset(
        {"symmetry": (("layer", "head"), np.arange(6.0).reshape(2, 3)), "directionality": ("layer", [0.1, -0.2])},
        coords={"layer": [0, 1], "head": [0, 1, 2], "model": "toy"},
        attrs=attrs,
    )


def test_provenance_attrs():
    attrs = make_dataset().attrs
    for key in results.REQUIRED_ATTRS:
        assert key in attrs
    assert attrs["score_convention"] == "paper"
    assert "||M_s||" in attrs["score_convention_definition"]
    assert json.loads(attrs["parameters"]) == {"d_models": [64, 128], "seed": 0}
    versions = json.loads(attrs["library_versions"])
    assert versions["torch"].startswith("2.") and "python" in versions
    with pytest.raises(ValueError, match="convention"):
        results.provenance_attrs(parameters={}, scored_matrix="x", convention="other")
    with pytest.raises(TypeError, match="JSON"):
        results.provenance_attrs(parameters={"f": object()}, scored_matrix="x")


def test_round_trip(tmp_path):
    ds = make_dataset()
    path = results.save_dataset(ds, tmp_path / "sub" / "scores.nc")
    back = results.load_dataset(path)
    xr.testing.assert_identical(back, ds)
    assert list(tmp_path.joinpath("sub").iterdir()) == [path]


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "scores.nc"
    bad = make_dataset()
    bad.attrs["flag"] = True  # netCDF cannot store booleans
    with pytest.raises(ValueError, match="flag"):
        results.save_dataset(bad, target)
    incomplete = make_dataset()
    del incomplete.attrs["git_commit"]
    with pytest.raises(ValueError, match="git_commit"):
        results.save_dataset(incomplete, target)
    assert list(tmp_path.iterdir()) == []

    results.save_dataset(make_dataset(), target)
    before = target.read_bytes()

    def explode(self, path, **kwargs):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", explode)
    with pytest.raises(OSError, match="disk full"):
        results.save_dataset(make_dataset(seed=1), target)
    assert target.read_bytes() == before  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.nc"]  # no temporary file left


def test_load_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no result dataset"):
        results.load_dataset(tmp_path / "nope.nc")
