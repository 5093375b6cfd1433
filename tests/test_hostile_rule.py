"""The hostile suite's own rule (tests/hostile.py) holds what it claims: a refusal is one line and exit 2, the canary
pickle runs code under a general unpickler and not under torch's weights-only one, the tiny disks are full or
read-only."""

import errno
import pickle

import pytest
import torch

from hostile import TreeWatch, assert_refused, canary, code_running_pickle, full_disk, read_only_folder

pytestmark = pytest.mark.hostile


def test_a_refusal_is_one_line_naming_the_problem_with_exit_2():
    assert_refused(2, "attnstruct: error: bad.json is not JSON\n", "bad.json")
    for status, err in [
        (1, "attnstruct: error: x\n"),
        (2, "attnstruct: error: x\nmore\n"),
        (2, "attnstruct: error: \n"),
        (2, "Traceback (most recent call last):\n"),
        (2, "attnstruct: error: something else\n"),
    ]:
        with pytest.raises(AssertionError):
            assert_refused(status, err, "x")


def test_the_canary_pickle_runs_code_only_under_a_general_unpickler(tmp_path):
    path = canary(tmp_path)
    payload = code_running_pickle(path)
    (tmp_path / "p.pt").write_bytes(payload)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(tmp_path / "p.pt", weights_only=True)
    assert not path.exists()
    pickle.loads(payload)
    assert path.exists()


def test_a_tree_watch_sees_what_was_created_changed_and_removed(tmp_path):
    (tmp_path / "kept").write_text("a")
    (tmp_path / "gone").write_text("a")
    with TreeWatch(tmp_path) as watch:
        (tmp_path / "new").write_text("b")
        (tmp_path / "gone").unlink()
    assert watch.changed() == {"new", "gone"}


def test_the_full_disk_has_no_room_and_the_read_only_folder_takes_no_file(tmp_path):
    with full_disk(tmp_path / "full") as folder:
        with pytest.raises(OSError) as full:
            (folder / "x").write_bytes(b"\0" * 8192)
        assert full.value.errno == errno.ENOSPC
    with read_only_folder(tmp_path / "ro") as folder:
        with pytest.raises(OSError) as refused:
            (folder / "x").write_text("a")
        assert refused.value.errno == errno.EROFS
