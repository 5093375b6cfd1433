"""Progress bars: TQDM_DISABLE switches off a bar the caller asked for; without it the caller decides."""

import pytest

from attnstruct.report.progress import bar_disabled


@pytest.mark.parametrize("value", ["1", "true", "Yes", " on "])
def test_the_environment_hides_a_requested_bar(value, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", value)
    assert bar_disabled(True) and bar_disabled(False)


@pytest.mark.parametrize("value", [None, "", "0", "false"])
def test_otherwise_the_caller_decides(value, monkeypatch):
    if value is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", value)
    assert not bar_disabled(True) and bar_disabled(False)
