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

    def explode(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", explode)
    with pytest.raises(OSError, match="disk full"):
        results.save_dataset(make_dataset(seed=1), target)
    assert target.read_bytes() == before  # the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.nc"]  # no temporary file left


def test_load_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no result dataset"):
        results.load_dataset(tmp_path / "nope.nc")


def test_a_failed_write_is_one_output_error_naming_the_file_and_the_reason(tmp_path):
    import errno

    def no_room(tmp):
        with open(tmp, "wb") as handle:
            handle.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp))

    target = tmp_path / "scores.csv"
    with pytest.raises(results.OutputError) as failed:
        results.write_atomically(target, no_room)
    assert str(failed.value) == f"cannot write {target}: No space left on device"
    assert failed.value.errno == errno.ENOSPC and isinstance(failed.value, OSError)
    assert list(tmp_path.iterdir()) == []


def test_a_file_name_the_file_system_takes_is_written_whatever_the_temporary_name_would_be(tmp_path):
    target = tmp_path / ("s" * 250 + ".nc")  # 253 bytes: the file system's limit is 255, the temporary's 268
    assert results.save_dataset(make_dataset(), target) == target
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_a_name_too_long_for_the_file_system_is_an_output_error_naming_it(tmp_path):
    target = tmp_path / ("s" * 300 + ".csv")
    with pytest.raises(results.OutputError, match="File name too long"):
        results.write_atomically(target, lambda tmp: open(tmp, "w").close())
    assert list(tmp_path.iterdir()) == []


def test_a_dataset_goes_to_the_file_as_bytes_made_in_memory(tmp_path, monkeypatch):
    """HDF5 never gets a path: a failed write of the file system is Python's OSError, never HDF5's crash."""
    opened = []
    real = xr.Dataset.to_netcdf

    def spy(self, path=None, *args, **kwargs):
        opened.append(path)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", spy)
    dataset = make_dataset()  # once: its provenance stamps the second it was made
    path = results.save_dataset(dataset, tmp_path / "scores.nc")
    assert opened == [None]
    xr.testing.assert_identical(results.load_dataset(path), dataset)


def test_a_folder_lock_refuses_a_second_holder_naming_the_folder_and_the_pid(tmp_path):
    import os

    with results.output_lock(tmp_path, "sweep"):
        with pytest.raises(results.FolderInUse) as busy:
            with results.output_lock(tmp_path, "sweep"):
                pass
    assert str(tmp_path) in str(busy.value) and f"pid {os.getpid()}" in str(busy.value)
    with results.output_lock(tmp_path, "sweep"):  # released: taken again at once
        pass
    assert list(tmp_path.iterdir()) == []  # the lock file goes with its holder


def test_the_lock_of_a_killed_holder_does_not_block_the_next_run(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from attnstruct import results\n"
            "with results.output_lock(sys.argv[1], 'sweep'):\n    print('held', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(results.FolderInUse, match=f"pid {holder.pid}"):
            with results.output_lock(tmp_path, "sweep"):
                pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        with results.output_lock(tmp_path, "sweep"):
            pass
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_leftovers_of_killed_writes_are_removed_and_nothing_else(tmp_path):
    for name in (".scores.nc.k2j4h5g1.tmp", ".failures.csv.abc_1234.tmp", "kept.nc", ".hidden", "notes.tmp"):
        (tmp_path / name).write_text("x")
    (tmp_path / ".folder.tmp").mkdir()
    assert sorted(results.remove_leftovers(tmp_path)) == [
        tmp_path / ".failures.csv.abc_1234.tmp",
        tmp_path / ".scores.nc.k2j4h5g1.tmp",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".folder.tmp", ".hidden", "kept.nc", "notes.tmp"]


def test_a_dataset_whose_data_would_be_read_from_another_file_is_refused(tmp_path):
    """HDF5 lets a variable's bytes live in another file (external storage); a reader would bring that file's bytes
    in as the variable's values."""
    import h5netcdf

    secret = tmp_path / "elsewhere.bin"
    secret.write_bytes(np.arange(4.0).tobytes())
    with h5netcdf.File(tmp_path / "hostile.nc", "w") as f:
        f.dimensions = {"x": 4}
        f.create_variable("symmetry", ("x",), "f8", external=[(str(secret), 0, 32)])
    with pytest.raises(results.UnsafeDataset, match="symmetry"):
        results.load_dataset(tmp_path / "hostile.nc")


def test_a_dataset_with_a_link_into_another_file_is_refused(tmp_path):
    import h5py

    results.save_dataset(make_dataset(), tmp_path / "other.nc")
    path = results.save_dataset(make_dataset(), tmp_path / "linked.nc")
    with h5py.File(path, "r+") as f:
        f["borrowed"] = h5py.ExternalLink(str(tmp_path / "other.nc"), "/symmetry")
    with pytest.raises(results.UnsafeDataset, match="borrowed"):
        results.load_dataset(path)
