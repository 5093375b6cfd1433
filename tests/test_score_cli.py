"""``attnstruct score``: the table, its files, and one-line errors with exit status 2."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from extract_models import build

from attnstruct import cli
from attnstruct.results import load_dataset

from reference import directionality_paper, symmetry_paper


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert")
    model = build("bert")
    model.save_pretrained(folder)
    return folder, model


def reference_layer_scores(model):
    """Independent computation: form sum_h W_q^h W_k^h^T = W_q^lin^T W_k^lin and apply the definitions."""
    rows = []
    for i, layer in enumerate(model.encoder.layer):
        m = (layer.attention.self.query.weight.T @ layer.attention.self.key.weight).detach().double().numpy()
        rows.append((i, symmetry_paper(m), directionality_paper(m)))
    return rows


def test_score_prints_one_row_per_layer_matching_the_definitions(bert_dir, capsys):
    folder, model = bert_dir
    assert cli.main(["score", str(folder)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["stack", "layer", "symmetry", "directionality"]
    assert len(lines) == 1 + len(model.encoder.layer)
    for line, (layer, sym, direc) in zip(lines[1:], reference_layer_scores(model), strict=True):
        stack, got_layer, got_sym, got_dir = line.split()
        assert stack == "encoder" and int(got_layer) == layer
        assert float(got_sym) == pytest.approx(sym, abs=1e-4) and float(got_dir) == pytest.approx(direc, abs=1e-4)


def test_score_per_head_and_output_files(bert_dir, tmp_path, capsys):
    folder, model = bert_dir
    assert cli.main(["score", str(folder), "--per-head", "--out", str(tmp_path / "s.csv")]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    table = pd.read_csv(tmp_path / "s.csv")
    heads = table[table["head"].notna()].reset_index(drop=True)  # the layer rows have no head
    n_heads = model.config.num_attention_heads
    assert len(out) - 1 == len(heads) == n_heads * len(model.encoder.layer)
    assert len(table) - len(heads) == len(model.encoder.layer)
    assert list(table.columns[:6]) == ["model", "stack", "layer", "head", "symmetry", "directionality"]
    q = model.encoder.layer[0].attention.self.query.weight.detach().double().view(n_heads, -1, 32)
    k = model.encoder.layer[0].attention.self.key.weight.detach().double().view(n_heads, -1, 32)
    head0 = (q[0].T @ k[0]).numpy()
    assert heads.symmetry[0] == pytest.approx(symmetry_paper(head0), abs=1e-5)

    assert cli.main(["score", str(folder / "model.safetensors"), "--out", str(tmp_path / "s.nc")]) == 0
    ds = load_dataset(tmp_path / "s.nc")
    assert ds.symmetry.dims == ("model", "stack", "layer")
    assert json.loads(ds.attrs["parameters"])["per_head"] is False
    np.testing.assert_allclose(
        ds.symmetry.sel(stack="encoder").values[0], [r[1] for r in reference_layer_scores(model)], atol=1e-6
    )


def test_encoder_decoder_stacks(tmp_path, capsys):
    model = build("whisper")
    model.save_pretrained(tmp_path)
    assert cli.main(["score", str(tmp_path)]) == 0
    stacks = [line.split()[0] for line in capsys.readouterr().out.strip().splitlines()[1:]]
    assert stacks == ["encoder"] * 2 + ["decoder"] * 2 + ["cross"] * 2


def one_error_line(capsys):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("attnstruct: error:"), err
    return err


def test_errors_exit_2_with_one_line(bert_dir, tmp_path, capsys):
    folder, model = bert_dir
    assert cli.main(["score", str(tmp_path / "missing")]) == 2
    assert "no such file" in one_error_line(capsys)

    assert cli.main(["score", str(folder), "--out", str(tmp_path / "s.txt")]) == 2
    assert ".csv or .nc" in one_error_line(capsys)
    assert not (tmp_path / "s.txt").exists()

    unknown = tmp_path / "xlnet"
    unknown.mkdir()
    config = json.loads((folder / "config.json").read_text())
    (unknown / "config.json").write_text(json.dumps({**config, "model_type": "xlnet"}))
    (unknown / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    assert cli.main(["score", str(unknown)]) == 2
    err = one_error_line(capsys)
    assert "unsupported architecture" in err and "xlnet" in err and "llama" in err

    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "config.json").write_text((folder / "config.json").read_text())
    data = (folder / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[: len(data) // 3])
    assert cli.main(["score", str(cut), "--out", str(tmp_path / "cut.csv")]) == 2
    assert "truncated" in one_error_line(capsys)
    assert not (tmp_path / "cut.csv").exists()

    nan_model = build("bert")
    with torch.no_grad():
        nan_model.encoder.layer[0].attention.self.query.weight[3, 3] = float("nan")
    nan_model.save_pretrained(tmp_path / "nan")
    capsys.readouterr()  # drop save_pretrained's progress output
    assert cli.main(["score", str(tmp_path / "nan"), "--out", str(tmp_path / "nan.nc")]) == 2
    assert "NaN" in one_error_line(capsys)
    assert not (tmp_path / "nan.nc").exists()


def test_score_reads_every_format_and_agrees_with_the_model(tmp_path, capsys):
    """GGUF, ONNX and CTranslate2 files written from tiny models score as the models themselves do."""
    import test_extract_ctranslate2 as ct2
    import test_extract_gguf as gg
    import test_extract_onnx as ox
    import transformers

    from attnstruct.checkpoints.extract import iter_blocks
    from attnstruct.checkpoints.scoring import score_model

    llama = gg.tiny_model("llama")
    gg.write_gguf(tmp_path / "llama.gguf", llama, "llama")
    torch.manual_seed(0)
    bert = transformers.BertModel(
        transformers.BertConfig(
            hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=64, vocab_size=50
        )
    ).eval()
    ox._save(ox._mimic_graph(bert), tmp_path / "bert.onnx")
    whisper = build("whisper")
    (tmp_path / "ct2").mkdir()
    ct2.write_ct2(tmp_path / "ct2" / "model.bin", ct2.whisper_variables(whisper))
    for path, model in (
        (tmp_path / "llama.gguf", llama.model),
        (tmp_path / "bert.onnx", bert),
        (tmp_path / "ct2", whisper),
    ):
        from_file = score_model(path)
        from_model = score_model(model)
        assert len(from_file) == len(list(iter_blocks(path)))
        pd.testing.assert_frame_equal(
            from_file[["stack", "layer", "symmetry", "directionality"]],
            from_model[["stack", "layer", "symmetry", "directionality"]],
            atol=1e-6,
        )
        assert cli.main(["score", str(path)]) == 0
        assert len(capsys.readouterr().out.strip().splitlines()) == 1 + len(from_file)


def test_precision_choice(bert_dir):
    from attnstruct.checkpoints.scoring import block_precision, score_model

    folder, _ = bert_dir
    exact, single = score_model(folder, precision="float64"), score_model(folder, precision="float32")
    np.testing.assert_allclose(exact.symmetry, single.symmetry, atol=1e-5)
    assert set(exact.precision) == {"float64"} and set(single.precision) == {"float32"}
    assert block_precision(768, "auto") == "float64" and block_precision(4096, "auto") == "float32"
    with pytest.raises(ValueError, match="precision"):
        score_model(folder, precision="half")


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--num-std", "nan"], "--num-std"),
        (["--num-std", "inf"], "--num-std"),
        (["--num-std", "-1"], "--num-std"),
        (["--num-std", "\uff12"], "--num-std"),  # a full-width 2, which float() reads as 2
        (["--heads", "0"], "--heads"),
        (["--heads", "\uff14"], "--heads"),
        (["--precision", "half"], "--precision"),
        (["--out", ""], "--out"),
    ],
    ids=["nan", "inf", "negative", "full-width", "no-heads", "full-width-heads", "precision", "empty-out"],
)
def test_bad_score_arguments_are_refused_before_anything_is_written(
    bert_dir, tmp_path, capsys, monkeypatch, extra, named
):
    from hostile import TreeWatch, assert_refused

    folder, _ = bert_dir
    monkeypatch.chdir(tmp_path)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["score", str(folder), *extra])
    assert_refused(status, capsys.readouterr().err, named)
    assert watch.changed() == set()


def test_an_empty_source_is_refused_rather_than_taken_for_the_current_folder(bert_dir, capsys, monkeypatch):
    from hostile import assert_refused

    folder, _ = bert_dir
    monkeypatch.chdir(folder)  # a checkpoint folder: an empty name would score it
    assert_refused(cli.main(["score", ""]), capsys.readouterr().err, "source", "empty name")


@pytest.mark.parametrize(
    "out, reason",
    [("a-folder.nc", "it is a folder"), ("a-file/s.nc", "is not a folder"), ("s" * 300 + ".csv", "File name too long")],
    ids=["folder", "below-a-file", "name-too-long"],
)
def test_an_out_that_cannot_be_a_file_is_refused_before_scoring(bert_dir, tmp_path, capsys, monkeypatch, out, reason):
    import attnstruct.checkpoints.scoring as scoring

    from hostile import TreeWatch, assert_refused

    (tmp_path / "a-folder.nc").mkdir()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(scoring, "score_model", lambda *a, **k: pytest.fail("scored before the output was checked"))
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["score", str(bert_dir[0]), "--out", str(tmp_path / out)])
    assert_refused(status, capsys.readouterr().err, str(tmp_path / out), reason)
    assert watch.changed() == set()


def test_a_device_or_a_pipe_is_refused_in_one_line(tmp_path, capsys):
    import os

    os.mkfifo(tmp_path / "model.safetensors")
    for source in ("/dev/null", str(tmp_path / "model.safetensors")):
        assert cli.main(["score", source]) == 2
        assert f"{source} is neither a regular file nor a folder" in one_error_line(capsys)


@pytest.mark.parametrize(
    "config", ["[1, 2]", '{"model_type": ["bert"]}', "[" * 100_000 + "]" * 100_000], ids=["list", "type-list", "deep"]
)
def test_a_config_json_that_is_no_model_config_is_one_line_naming_the_folder(bert_dir, tmp_path, capsys, config):
    folder, _ = bert_dir
    (tmp_path / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    (tmp_path / "config.json").write_text(config)
    assert cli.main(["score", str(tmp_path)]) == 2
    assert str(tmp_path) in one_error_line(capsys)


def test_a_refusal_names_the_checkpoint_even_where_the_reader_names_only_a_file_in_it(bert_dir, tmp_path, capsys):
    folder, _ = bert_dir
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    (tmp_path / "model.safetensors").write_bytes(b"\x10" + bytes(7) + b"{}")
    assert cli.main(["score", str(tmp_path)]) == 2
    line = one_error_line(capsys)
    assert f"{tmp_path}: cannot read model.safetensors" in line


def test_a_disk_failing_under_the_reader_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    import errno

    import attnstruct.checkpoints.model_scores as model_scores

    from hostile import assert_refused

    def failing(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error", str(tmp_path / "model.safetensors"))

    monkeypatch.setattr(model_scores, "score", failing)
    status = cli.main(["score", str(tmp_path)])
    assert_refused(status, capsys.readouterr().err, "model.safetensors", "Input/output error")
