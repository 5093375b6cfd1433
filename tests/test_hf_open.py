"""A text run's snapshot folders open in transformers (its custom-model mechanism: ``auto_map`` and
``trust_remote_code``), with the training model's logits, while ``attnstruct score`` never runs their code."""

import json
import re
import sys
from pathlib import Path

import pytest
import torch

from attnstruct import cli
from attnstruct.tasks import text_config
from attnstruct.training import snapshots
from attnstruct.training.model import LanguageModel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def modules_cache(tmp_path_factory):
    """transformers copies a folder's model code into its modules cache before importing it: a cache of the tests'."""
    import transformers.dynamic_module_utils as dynamic

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dynamic, "HF_MODULES_CACHE", str(tmp_path_factory.mktemp("hf-modules")))
        patch.setattr(sys, "path", list(sys.path))
        yield


def snapshot(
    tmp_path: Path, objective: str, run_dir: Path | None = None, attention: str = "softmax"
) -> tuple[Path, LanguageModel, bool]:
    """The final snapshot of a tiny text model of ``objective`` and ``attention`` (random weights), its model, and its
    causality."""
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("the king is dead long live the king\n" * 20)
    config = text_config.TextConfig(
        objective=objective, corpus=str(corpus), vocab_size=300, d_model=16, n_layers=2, n_heads=2, attention=attention
    )
    torch.manual_seed(0)
    model = LanguageModel(config.model_config(300)).eval()
    folder = snapshots.save(run_dir or tmp_path / "run", config, model, 12, weights=snapshots.SAFETENSORS, final=True)
    return folder, model, bool(config.causal)


@pytest.mark.parametrize(
    ("objective", "auto_class", "causal"),
    [("mlm", "AutoModelForMaskedLM", False), ("next-token", "AutoModelForCausalLM", True)],
)
def test_a_text_snapshot_opens_in_transformers_with_the_training_models_logits(
    tmp_path, modules_cache, objective, auto_class, causal
):
    import transformers

    folder, model, is_causal = snapshot(tmp_path, objective)
    assert is_causal is causal
    loaded, info = getattr(transformers, auto_class).from_pretrained(
        folder, trust_remote_code=True, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids = torch.randint(0, 300, (3, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, model(ids, causal))


@pytest.mark.parametrize("attention", ["sigmoid", "softmax-null-slot"])
def test_a_snapshot_of_another_attention_opens_with_that_attention(tmp_path, modules_cache, attention):
    import transformers

    folder, model, _ = snapshot(tmp_path, "next-token", attention=attention)
    loaded, info = transformers.AutoModelForCausalLM.from_pretrained(
        folder, trust_remote_code=True, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert loaded.config.transformer_config().attention == attention
    ids = torch.randint(0, 300, (3, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, model(ids, True))


def test_a_snapshot_of_an_unknown_attention_is_refused_in_one_line(tmp_path, modules_cache):
    from transformers import AutoModelForCausalLM

    folder, _, _ = snapshot(tmp_path, "next-token")
    config = json.loads((folder / "config.json").read_text())
    config["attnstruct"]["transformer"]["attention"] = "linear"
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="unknown attention 'linear'; choose one of softmax, sigmoid"):
        AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)


def test_the_config_of_a_snapshot_opens_in_transformers(tmp_path, modules_cache):
    from transformers import AutoConfig

    folder, model, _ = snapshot(tmp_path, "mlm")
    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    assert config.model_type == "attnstruct-encoder"
    assert config.transformer_config() == model.config


def test_a_padding_mask_is_refused_in_one_line(tmp_path, modules_cache):
    from transformers import AutoModelForMaskedLM

    folder, _, _ = snapshot(tmp_path, "mlm")
    loaded = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)
    ids = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="padding"):
        loaded(input_ids=ids, attention_mask=torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]))


def test_the_documented_example_opens_a_snapshot(tmp_path, modules_cache, monkeypatch):
    docs = (ROOT / "docs" / "command-line.md").read_text()
    example = re.search(r"<!-- transformers example -->\n```python\n(.*?)```", docs, re.S).group(1)
    assert len(example.strip().splitlines()) == 3
    from attnstruct.cli import train

    assert all(line in train.__doc__ for line in example.strip().splitlines())  # the command's help shows the same
    snapshot(tmp_path, "mlm", run_dir=tmp_path / "runs" / "enc")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(example, namespace)  # noqa: S102  (the docs' own example)
    assert namespace["logits"].shape == (1, 4, 300)


def test_score_reads_a_snapshot_without_running_the_code_it_holds(tmp_path, capsys):
    """A run folder is untrusted input: its ``.py`` files are never imported by the project's own reader."""
    folder, _, _ = snapshot(tmp_path, "mlm")
    assert cli.main(["score", str(folder), "--out", str(tmp_path / "before.csv")]) == 0
    marker = tmp_path / "ran"
    for name in ("configuration_attnstruct.py", "modeling_attnstruct.py"):
        (folder / name).write_text(f"open({str(marker)!r}, 'w').close()\n")
    assert cli.main(["score", str(folder), "--out", str(tmp_path / "after.csv")]) == 0, capsys.readouterr().err
    assert not marker.exists()
    assert (tmp_path / "before.csv").read_text() == (tmp_path / "after.csv").read_text()
    assert "auto_map" in json.loads((folder / "config.json").read_text())
