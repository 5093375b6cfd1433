"""A mistyped local path or packaged name is reported as not found without asking the hub; an unreachable hub is
``offline``."""

import socket
import time

import pytest

from attnstruct import cli

pytestmark = pytest.mark.hub


def _score(capsys, source) -> tuple[int, str]:
    status = cli.main(["score", source])
    return status, capsys.readouterr().err


@pytest.mark.parametrize(
    "typo",
    ["./runs/enc", "~/no-such-model", "/no/such/model", "models/tiny.safetensors", "runs/tiny.pt", "org/w.ckpt"],
)
def test_a_path_like_name_is_not_found_without_asking_the_hub(hub, capsys, tmp_path, monkeypatch, typo):
    monkeypatch.chdir(tmp_path)
    status, err = _score(capsys, typo)
    assert status == 2 and err.count("\n") == 1 and "not found" in err and "no such file or folder" in err
    assert hub.requests == []


def test_a_name_whose_parent_folder_exists_is_not_found_without_asking_the_hub(hub, capsys, tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    status, err = _score(capsys, "runs/encoder")
    assert status == 2 and err.count("\n") == 1 and "not found" in err and "runs" in err
    assert hub.requests == []


@pytest.mark.parametrize("typo", ["minilm-l7", "MiniLM-L6", "minilml6", "smollm-135m"])
def test_a_near_miss_of_a_packaged_name_suggests_it_without_asking_the_hub(hub, capsys, typo):
    status, err = _score(capsys, typo)
    assert status == 2 and err.count("\n") == 1 and "not found" in err and "did you mean" in err
    assert "minilm-l6" in err or "smollm2-135m" in err
    assert hub.requests == []


def test_a_hub_id_still_goes_to_the_hub(hub, capsys):
    status, err = _score(capsys, "no-such-org/no-such-model")
    assert status == 2 and "not found" in err and hub.requests


def test_a_hub_that_refuses_connections_is_offline_in_one_line_and_quickly(hub, capsys, monkeypatch):
    with socket.socket() as held:  # a port nothing listens on once it is closed
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    status, err = _score(capsys, "some-org/some-model")
    assert status == 2 and err.count("\n") == 1 and "offline" in err and "could not be reached" in err
    assert time.monotonic() - start < 5
