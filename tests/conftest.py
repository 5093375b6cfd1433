from pathlib import Path

import numpy as np
import pytest
import torch
import transformers as T
from extract_models import CASES
from safetensors.torch import load_file
from standin_hub import StandinHub

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's training runs (bit-reproducible on a CPU), restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# Tiny hub repositories and a stand-in hub serving them (test_hub.py, test_sweep.py).
CAUSAL = ("gpt2", "llama")
SEQ2SEQ = ("bart",)


def tiny(name: str, seed: int = 0, **overrides):
    """A tiny model of ``name`` with its head (lm_head, tied embeddings) as a hub repository would hold it."""
    torch.manual_seed(seed)
    config = CASES[name].config()
    for key, value in overrides.items():
        setattr(config, key, value)
    if name in CAUSAL:
        return T.AutoModelForCausalLM.from_config(config)
    if name in SEQ2SEQ:
        return T.AutoModelForSeq2SeqLM.from_config(config)
    return T.AutoModel.from_config(config)


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """Local folders of the models the stand-in hub serves, by repo id."""
    root = tmp_path_factory.mktemp("repos")
    folders = {}
    for repo, name, kw, save in (
        ("tiny/bert", "bert", {}, {}),
        ("tiny/llama-gqa-sharded", "llama", {}, {"max_shard_size": "20KB"}),
        ("tiny/bart", "bart", {}, {}),
        ("tiny/gpt2", "gpt2", {}, {}),
        ("tiny/wide-vocab", "bert", {"vocab_size": 6000, "intermediate_size": 512}, {}),
        ("tiny/bin-only", "bert", {}, {}),
    ):
        folder = root / repo.replace("/", "--")
        tiny(name, **kw).save_pretrained(folder, **save)
        if repo == "tiny/bin-only":  # an older repository: pytorch_model.bin and no safetensors
            weights = folder / "model.safetensors"
            torch.save(load_file(weights), folder / "pytorch_model.bin")
            weights.unlink()
        folders[repo] = folder
    return folders


@pytest.fixture
def hub(repos, tmp_path, monkeypatch):
    """A running stand-in hub with every repository of ``repos``, and the environment pointed at it."""
    with StandinHub() as server:
        for repo, folder in repos.items():
            server.add_folder(repo, folder)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "attnstruct-cache"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("HF_TOKEN", "hf_test_token_not_real")
        yield server
