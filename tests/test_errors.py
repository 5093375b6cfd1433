"""Typed failures: an ExtractionError carries its kind, and the sweep, the command line and the hub errors read the
kind, never the message's text; every command refuses bad input with one line through one helper."""

import pickle
from types import SimpleNamespace

import pandas as pd
import pytest

from attnstruct import cli
from attnstruct.checkpoints import sweep
from attnstruct.checkpoints.extract import FAILURE_KINDS, ExtractionError, iter_blocks
from attnstruct.checkpoints.extract.blocks import hub_failures_as_extraction_errors
from attnstruct.cli.errors import CommandError, Parser, refuse
from attnstruct.hub_client.client import hub_error
from attnstruct.hub_client.failures import HUB_FAILURE_KINDS, HubError
from attnstruct.untrusted import one_line

from conftest import ROOT


def test_the_message_says_the_kind_first_and_error_says_only_the_detail():
    gated = ExtractionError("org/model needs a licence", "gated")
    assert (gated.kind, gated.detail, str(gated)) == (
        "gated",
        "org/model needs a licence",
        "gated: org/model needs a licence",
    )
    plain = ExtractionError("tensor q contains NaN or inf")
    assert (plain.kind, str(plain)) == ("error", "tensor q contains NaN or inf")
    assert str(ExtractionError("two\nlines", "truncated")) == "truncated: two lines"


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown failure kind 'broken'"):
        ExtractionError("x", "broken")


def test_the_kind_survives_pickling():
    again = pickle.loads(pickle.dumps(ExtractionError("gone", "not found")))
    assert (type(again), again.kind, again.detail) == (ExtractionError, "not found", "gone")


def test_one_line_collapses_a_message():
    assert one_line(OSError("disk\n  full")) == "OSError: disk full" and one_line(KeyError()) == "KeyError"


@pytest.mark.parametrize(
    "status, kind",
    [(429, "rate limited"), (500, "error"), (None, "error")],
)
def test_hub_errors_are_typed_by_the_http_status(status, kind):
    class HubFailure(Exception):
        pass

    err = HubFailure("server says no")
    err.response = SimpleNamespace(status_code=status) if status else None
    assert hub_error(err, "org/model").kind == kind


def test_a_hub_error_says_its_kind_first_in_one_line_and_survives_pickling():
    assert str(HubError("org/m needs\na licence", "gated")) == "gated: org/m needs a licence"
    assert str(HubError("HTTP 500")) == "HTTP 500"
    again = pickle.loads(pickle.dumps(HubError("gone", "not found")))
    assert (type(again), again.kind, again.detail) == (HubError, "not found", "gone")
    with pytest.raises(ValueError, match="unknown hub failure kind"):
        HubError("x", "unsupported architecture")


def test_every_hub_failure_kind_is_a_checkpoint_failure_kind():
    assert set(HUB_FAILURE_KINDS) <= set(FAILURE_KINDS)


@pytest.mark.parametrize("kind", HUB_FAILURE_KINDS)
def test_a_hub_failure_where_a_checkpoint_is_read_is_the_extraction_error_of_its_kind_and_line(kind):
    with pytest.raises(ExtractionError) as caught:
        with hub_failures_as_extraction_errors():
            raise HubError("org/model (no such revision)", kind)
    assert (caught.value.kind, str(caught.value)) == (kind, str(HubError("org/model (no such revision)", kind)))


def test_a_missing_path_is_not_found(tmp_path):
    with pytest.raises(ExtractionError) as error:
        list(iter_blocks(tmp_path / "nothing"))
    assert error.value.kind == "not found"


def test_the_sweep_lists_the_kind_of_the_error_not_words_of_its_message(tmp_path, monkeypatch):
    def fail(model, **_):
        if model == "a":
            raise ExtractionError("the words not found and gated appear here", "truncated")
        raise RuntimeError("unsupported architecture, says the text")

    monkeypatch.setattr(sweep, "score_one", fail)
    result = sweep.run_sweep(["a", "b"], tmp_path, device="cpu", workers=1)
    table = pd.read_csv(tmp_path / "failures.csv").set_index("model")
    assert (
        table.loc["a", "kind"] == "truncated"
        and table.loc["a", "reason"] == "the words not found and gated appear here"
    )
    assert table.loc["b", "kind"] == "error" and table.loc["b", "reason"].startswith("RuntimeError: ")
    assert set(table["kind"]) <= set(FAILURE_KINDS) and len(result.failures) == 2


def test_the_command_line_prints_the_kind_and_exits_2(tmp_path, capsys):
    assert cli.main(["score", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnstruct: error: not found: ") and err.count("\n") == 1


def test_every_command_refuses_through_one_helper(capsys):
    parser = Parser(prog="demo")
    parser.add_argument("--n", type=int)
    with pytest.raises(CommandError, match="invalid int value"):
        parser.parse_args(["--n", "x"])
    assert refuse("demo", CommandError("a\nb")) == 2 and capsys.readouterr().err == "demo: error: a b\n"
    for argv in (["nonsense"], ["fetch-models", "--set", "nope"], ["train", "--objective", "nope", "--run-dir", "x"]):
        assert cli.main(argv) == 2
        assert capsys.readouterr().err.count("\n") == 1


def test_no_module_parses_a_message_for_its_kind_or_keeps_its_own_argument_error():
    sources = "".join(p.read_text() for p in (ROOT / "src" / "attnstruct").rglob("*.py"))
    assert "class _ArgumentError" not in sources and "def failure_kind" not in sources
    assert "def _one_line" not in sources and "def _first_line(exc" not in sources


@pytest.mark.parametrize(
    "command, module, function", [("list", "run", "list_parameters"), ("fetch-models", "fetch", "main_fetch")]
)
def test_an_output_that_cannot_be_written_is_refused_in_one_line_by_every_command(
    tmp_path, capsys, monkeypatch, command, module, function
):
    import errno
    import importlib

    from attnstruct.results import OutputError

    from hostile import assert_refused

    target = tmp_path / "table.csv"

    def full(*_):
        raise OutputError(target, "No space left on device", errno.ENOSPC)

    monkeypatch.setattr(importlib.import_module(f"attnstruct.cli.{module}"), function, full)
    assert_refused(cli.main([command]), capsys.readouterr().err, str(target), "No space left on device")
