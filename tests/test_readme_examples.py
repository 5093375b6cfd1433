"""The README's Python examples run as written: ``at.score`` on a packaged checkpoint and on a model in memory first,
then the matrix functions."""

import re

import pandas as pd
import pytest

from conftest import ROOT


def python_blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    package = readme[readme.index("## The package") :]
    return re.findall(r"```python\n(.*?)```", package, re.S)


def test_the_first_python_example_is_at_score():
    assert python_blocks()[0].count("at.score(") == 2


@pytest.mark.checkpoint
def test_the_at_score_example_runs_as_written_on_a_packaged_checkpoint_and_a_model_in_memory():
    from attnstruct.checkpoints import zoo

    assert zoo.is_fetched("minilm-l6"), "run `make fetch` (attnstruct fetch-models --set core) first"
    namespace: dict = {}
    exec(compile(python_blocks()[0], "README.md", "exec"), namespace)
    table = namespace["scores"].table
    assert set(table["model"]) == {"minilm-l6"} and table["head"].isna().sum() == 6
    assert namespace["scores"].to_xarray()["head_symmetry"].shape == (1, 1, 6, 12)
    in_memory = eval("at.score(model)", namespace).table
    assert isinstance(in_memory, pd.DataFrame) and list(in_memory["layer"]) == [0, 1]


def test_the_factor_examples_run_as_written():
    namespace: dict = {}
    exec(compile(python_blocks()[1], "README.md", "exec"), namespace)
