"""What ``score --out`` and ``sweep`` write when the disk is full or read-only, when two sweeps share a folder or one is
killed, and what they do with hostile arguments and hostile sweep folders: one line, exit 2, nothing half-written
(tests/hostile.py). Every command runs in a process of its own: HDF5 crashed the interpreter on a full disk."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from extract_models import build

from hostile import TreeWatch, assert_process_refused, full_disk, read_only_folder, run_attnstruct

pytestmark = pytest.mark.hostile

OFFLINE = {"HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny BERT folder: scoring it needs no network and takes a fraction of a second."""
    folder = tmp_path_factory.mktemp("model") / "bert"
    build("bert").save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def listing(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("list") / "models.txt"
    path.write_text(f"{model}\n")
    return path


@pytest.fixture(scope="module")
def part(listing, tmp_path_factory):
    """A sweep's folder (models/, failures.csv, sweep.nc), to copy and spoil."""
    folder = tmp_path_factory.mktemp("part") / "part"
    done = run_attnstruct("sweep", str(listing), "--out", str(folder), env=OFFLINE)
    assert done.returncode == 0, done.stderr
    return folder


def files_under(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir() and p.name != ".filler")


# A full or read-only disk


def test_score_to_a_netcdf_file_on_a_full_disk_is_refused_and_leaves_the_old_file(model, tmp_path):
    with full_disk(tmp_path / "disk", room_kib=8) as disk:
        (disk / "x.nc").write_bytes(b"the old file")  # one page of the 8 KiB: 4 KiB left, less than the file
        done = run_attnstruct("score", str(model), "--out", str(disk / "x.nc"), env=OFFLINE)
        assert_process_refused(done, str(disk / "x.nc"), "No space left on device")
        assert (disk / "x.nc").read_bytes() == b"the old file" and files_under(disk) == ["x.nc"]


def test_score_to_a_csv_file_on_a_full_disk_is_refused_and_leaves_nothing(model, tmp_path):
    with full_disk(tmp_path / "disk") as disk:
        done = run_attnstruct("score", str(model), "--out", str(disk / "x.csv"), env=OFFLINE)
        assert_process_refused(done, str(disk / "x.csv"), "No space left on device")
        assert files_under(disk) == []


def test_a_sweep_on_a_full_disk_is_refused_and_leaves_no_file(listing, tmp_path):
    with full_disk(tmp_path / "disk", room_kib=8) as disk:
        done = run_attnstruct("sweep", str(listing), "--out", str(disk / "out"), env=OFFLINE)
        assert_process_refused(done, str(disk / "out" / "models"), "No space left on device")
        assert files_under(disk) == []


@pytest.mark.parametrize("name", ["x.nc", "x.csv"])
def test_score_to_a_read_only_disk_is_refused_before_scoring(model, tmp_path, name):
    with read_only_folder(tmp_path / "disk") as disk:
        done = run_attnstruct("score", str(model), "--out", str(disk / name), env=OFFLINE)
        assert_process_refused(done, str(disk / name), "Read-only file system")
        assert done.stdout == ""  # refused before the table: nothing was scored


@pytest.mark.parametrize("out", ["", "out"], ids=["the-mount-itself", "a-folder-in-it"])
def test_a_sweep_into_a_read_only_disk_is_refused(listing, tmp_path, out):
    with read_only_folder(tmp_path / "disk") as disk:
        done = run_attnstruct("sweep", str(listing), "--out", str(disk / out), env=OFFLINE)
        assert_process_refused(done, str(disk), "Read-only file system")


# Two sweeps into one folder, and a killed sweep

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from attnstruct import results
    from attnstruct.checkpoints import sweep

    def write_slowly(dataset, path):  # a write that is under way when the process is killed
        def write(tmp):
            Path(tmp).write_bytes(b"half a file")
            print("writing", flush=True)
            time.sleep(300)
        results.write_atomically(path, write)

    sweep.save_dataset = write_slowly
    sweep.run_sweep([sys.argv[1]], sys.argv[2], workers=1)
    """
)


def test_a_second_sweep_is_refused_and_a_killed_ones_lock_and_leftovers_do_not_outlive_it(model, listing, tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(model), str(out)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **OFFLINE, "OMP_NUM_THREADS": "1"},
    )
    try:
        assert holder.stdout.readline().strip() == "writing"
        with TreeWatch(out) as watch:
            second = run_attnstruct("sweep", str(listing), "--out", str(out), env=OFFLINE)
        assert_process_refused(second, str(out), f"pid {holder.pid}")
        assert watch.changed() == set()
        holder.kill()  # kill -9: no cleanup runs
        holder.wait(timeout=60)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    (leftover,) = (out / "models").glob(".*.tmp")
    third = run_attnstruct("sweep", str(listing), "--out", str(out), env=OFFLINE)
    assert third.returncode == 0, third.stderr
    assert not leftover.exists() and list(out.rglob(".*")) == []  # no temporary file, no lock file
    assert (out / "sweep.nc").is_file() and len(list((out / "models").glob("*.nc"))) == 1


# Hostile arguments


@pytest.mark.parametrize(
    "argv, named",
    [
        (["score", "{model}", "--num-std", "nan"], "--num-std"),
        (["score", "{model}", "--out", "{tmp}/a-folder.nc"], "{tmp}/a-folder.nc"),
        (["sweep", "{listing}", "--out", "{tmp}/o", "--num-std", "nan"], "--num-std"),
        (["sweep", "{listing}", "--out", "{tmp}/o", "--num-std", "inf"], "--num-std"),
        (["sweep", "{listing}", "--out", "{tmp}/o", "--shard", "\uff11/\uff12"], "--shard"),
        (["sweep", "{listing}", "--out", "{tmp}/o", "--workers", "100000"], "--workers"),
        (["sweep", "{listing}", "--out", ""], "--out"),
        (["sweep", "{tmp}/binary.txt", "--out", "{tmp}/o"], "{tmp}/binary.txt"),
        (["sweep", "--combine", "{tmp}", "--out", "{tmp}/o"], "{tmp}"),
    ],
    ids=[
        "score-nan",
        "score-out-a-folder",
        "sweep-nan",
        "sweep-inf",
        "full-width-shard",
        "workers-huge",
        "empty-out",
        "binary-list",
        "combine-not-a-sweep",
    ],
)
def test_hostile_arguments_are_refused_in_one_line_and_write_nothing(model, listing, tmp_path, argv, named):
    (tmp_path / "a-folder.nc").mkdir()
    (tmp_path / "binary.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\xff\xfe")
    values = {"model": model, "listing": listing, "tmp": tmp_path}
    with TreeWatch(tmp_path) as watch:
        done = run_attnstruct(*(a.format(**values) for a in argv), cwd=tmp_path, env=OFFLINE)
    assert_process_refused(done, named.format(**values))
    assert watch.changed() == set()


# Hostile sweep folders given to --combine


def _truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    "spoil",
    ["model-truncated", "model-random-bytes", "model-values-from-another-file", "sweep-truncated", "models-a-link-out"],
)
def test_a_hostile_part_is_refused_in_one_line_naming_it(part, tmp_path, spoil):
    copy = tmp_path / "part"
    shutil.copytree(part, copy)
    (model_file,) = (copy / "models").glob("*.nc")
    named = model_file
    if spoil == "model-truncated":
        _truncated(model_file)
    elif spoil == "model-random-bytes":
        model_file.write_bytes(b"\x89HDF\r\n\x1a\n" + os.urandom(4096))
    elif spoil == "sweep-truncated":
        _truncated(named := copy / "sweep.nc")
    elif spoil == "model-values-from-another-file":
        import h5py

        (tmp_path / "secret").write_bytes(b"\0" * 16)
        with h5py.File(model_file, "r+") as f:
            shape = f["symmetry"].shape
            f.create_dataset("borrowed", shape, "f8", external=[(str(tmp_path / "secret"), 0, 16)])
    elif spoil == "models-a-link-out":
        shutil.move(copy / "models", tmp_path / "elsewhere")
        (named := copy / "models").symlink_to(tmp_path / "elsewhere")
    with TreeWatch(tmp_path) as watch:
        done = run_attnstruct("sweep", "--combine", str(copy), "--out", str(tmp_path / "o"), env=OFFLINE)
    assert_process_refused(done, named.name)
    assert watch.changed() == set()
