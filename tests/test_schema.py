"""Every output of scores holds one schema: ``score --out`` CSV and .nc (per-head or not), the sweep's model files and
``sweep.nc``, and ``at.score(...).to_xarray()`` use the same names, dims and dtypes (docs/command-line.md's table),
and any of the datasets turned into a table gives rows."""

import numpy as np
import pandas as pd
import pytest

import attnstruct as at
from attnstruct import cli
from attnstruct.checkpoints import sweep
from attnstruct.checkpoints.schema import SCHEMA, TABLE_COLUMNS, tidy
from attnstruct.results import load_dataset

from conftest import tiny

MSL = ("model", "stack", "layer")
# The table of docs/command-line.md: name -> (dims, dtype); "str" is any string dtype.
EXPECTED = {
    "symmetry": (MSL, "float64"),
    "directionality": (MSL, "float64"),
    "head_symmetry": ((*MSL, "head"), "float64"),
    "head_directionality": ((*MSL, "head"), "float64"),
    "n_heads": (MSL, "int64"),
    "n_kv_heads": (MSL, "int64"),
    "d_model": (MSL, "int64"),
    "d_head": (MSL, "int64"),
    "causal": (MSL, "bool"),
    "extras": (("model", "stack"), "str"),
    "model": (("model",), "str"),
    "stack": (("stack",), "str"),
    "layer": (("layer",), "int64"),
    "head": (("head",), "int64"),
    "role": (("model",), "str"),
    "family": (("model",), "str"),
    "reader": (("model",), "str"),
    "n_params": (("model",), "float64"),
    "source": (("model",), "str"),
    "location": (("model",), "str"),
    "revision": (("model",), "str"),
    "commit": (("model",), "str"),
    "step": (("model",), "float64"),
    "tokens": (("model",), "float64"),
    "phase": (("model",), "float64"),
    "bytes_fetched": (("model",), "float64"),
    "weights_sha256": (("model",), "str"),
    "resolver_calls": (("model",), "float64"),
    "api_calls": (("model",), "float64"),
    "relative_depth": (("model", "layer"), "float64"),
}
HEAD_NAMES = {"head", "head_symmetry", "head_directionality"}


@pytest.fixture(scope="module")
def local_models(tmp_path_factory):
    """Two local checkpoints of different shapes: an encoder-decoder (three stacks) and a grouped-query decoder."""
    root = tmp_path_factory.mktemp("models")
    paths = []
    for name in ("whisper", "llama"):
        tiny(name).save_pretrained(root / name)
        paths.append(str(root / name))
    return paths


@pytest.fixture(scope="module", params=[False, True], ids=["layers", "per-head"])
def outputs(request, local_models, tmp_path_factory):
    """Every writer's output for both models: name -> dataset, and the CSV tables."""
    per_head = request.param
    flag = ["--per-head"] if per_head else []
    out = tmp_path_factory.mktemp("out")
    datasets, csvs = {}, {}
    for i, path in enumerate(local_models):
        assert cli.main(["score", path, "--out", str(out / f"{i}.nc"), *flag]) == 0
        assert cli.main(["score", path, "--out", str(out / f"{i}.csv"), *flag]) == 0
        datasets[f"score --out {i}.nc"] = load_dataset(out / f"{i}.nc")
        csvs[f"score --out {i}.csv"] = pd.read_csv(out / f"{i}.csv")
        datasets[f"at.score {i} to_xarray"] = at.score(path, per_head=per_head).to_xarray()
    run = sweep.run_sweep(local_models, out / "sweep", device="cpu", per_head=per_head, workers=1)
    assert not run.failures
    for i, path in enumerate(local_models):
        datasets[f"sweep model file {i}"] = load_dataset(out / "sweep" / "models" / f"{sweep.file_stem(path)}.nc")
    datasets["sweep.nc"] = load_dataset(out / "sweep" / "sweep.nc")
    return per_head, datasets, csvs


def _dtype(array) -> str:
    return "str" if array.dtype.kind in "OUS" else str(array.dtype)


def test_the_schema_module_and_the_documented_table_name_the_same_variables():
    assert {k: (dims, dtype) for k, (dims, dtype, _) in SCHEMA.items()} == EXPECTED


def test_every_dataset_holds_the_documented_names_dims_and_dtypes(outputs):
    per_head, datasets, _ = outputs
    expected = {k: v for k, v in EXPECTED.items() if per_head or k not in HEAD_NAMES}
    for writer, ds in datasets.items():
        got = {k: (ds[k].dims, _dtype(ds[k])) for k in ds.variables}
        assert got == expected, writer


def test_the_csv_is_the_long_table_of_at_score_with_the_model_and_integer_shapes(outputs, local_models):
    per_head, _, csvs = outputs
    for writer, table in csvs.items():
        assert list(table.columns) == list(TABLE_COLUMNS), writer
        assert {str(table[k].dtype) for k in ("layer", "n_heads", "n_kv_heads", "d_model", "d_head")} == {"int64"}
        assert table["causal"].dtype == bool and table["head"].isna().any() and table["head"].notna().any() == per_head
    first = csvs["score --out 0.csv"]
    assert set(first["model"]) == {local_models[0]}
    expected = at.score(local_models[0], per_head=per_head).table
    assert len(first) == len(expected)
    np.testing.assert_allclose(first["symmetry"], expected["symmetry"], atol=1e-6)


def test_family_is_the_models_own_type_reader_the_family_that_read_it_source_the_kind(outputs, local_models):
    _, datasets, csvs = outputs
    for writer, ds in datasets.items():
        whisper = ds.sel(model=local_models[0]) if local_models[0] in ds["model"].values else None
        if whisper is None:
            continue
        assert (whisper.family.item(), whisper.reader.item()) == ("whisper", "BART"), writer
        assert (whisper.source.item(), whisper.location.item()) == ("local", local_models[0]), writer
    table = csvs["score --out 0.csv"]
    assert set(table["family"]) == {"whisper"} and set(table["reader"]) == {"BART"}


def test_every_dataset_turned_into_a_table_has_one_row_per_block(outputs, local_models):
    per_head, datasets, _ = outputs
    expected = pd.concat([at.score(p, per_head=per_head).table for p in local_models], ignore_index=True)
    got = tidy(datasets["sweep.nc"])
    assert list(got.columns) == list(TABLE_COLUMNS) and dict(got.dtypes) == dict(expected.dtypes)
    pd.testing.assert_frame_equal(got.drop(columns="extras"), expected.drop(columns="extras"))
    for writer, ds in datasets.items():
        assert len(tidy(ds)) > 0, writer


def test_the_table_in_the_command_line_docs_is_the_schema():
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "command-line.md").read_text()
    rows = [line.split("|")[1:5] for line in text.splitlines() if line.startswith("| `") and line.count("|") == 5]
    documented = {n.strip(" `"): (tuple(d.strip(" `").split(", ")), t.strip()) for n, d, t, _ in rows}
    assert documented == EXPECTED
