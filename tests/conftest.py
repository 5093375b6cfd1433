from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
import transformers as T
from extract_models import CASES
from safetensors.torch import load_file
from standin_hub import StandinHub

from attnstruct import pipeline

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's training runs (bit-reproducible on a CPU), restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def executed_build(tmp_path_factory):
    """One build folder of notebooks executed with the tests' small parameters (``notebook_params``).

    ``executed_build(name)`` runs notebook ``name`` there once and returns ``(RunResult, parameters)``; later
    calls reuse the run (a failure is re-raised, not retried). The notebook tests check each run; the book,
    exercise and browser tests read the executed notebooks, figures and datasets under
    ``executed_build.build_dir``, laid out as ``make reproduce`` lays out ``build/quick/``.
    """
    from notebook_params import TEST_OVERRIDES

    build = tmp_path_factory.mktemp("build")
    done: dict[str, object] = {}

    def run(name: str):
        if name not in done:
            quick = pipeline.load_profile(ROOT, "quick").get(name, {})
            params = {**quick, **TEST_OVERRIDES.get(name, {})}
            try:
                result = pipeline.run_notebook(
                    ROOT, pipeline.resolve_notebook(ROOT, name), params, build, profile="quick"
                )
                done[name] = (result, params)
            except Exception as err:  # noqa: BLE001 - kept and re-raised for every later caller
                done[name] = err
        if isinstance(done[name], Exception):
            raise done[name]
        return done[name]

    run.build_dir = build
    return run


@pytest.fixture(scope="session")
def student_runs(tmp_path_factory):
    """``student_runs(name)``: the student version of notebook ``name`` (solutions stubbed,
    :func:`attnstruct.exercises.student_version`) run once with the parameters of ``executed_build``, every
    cell executed whatever raised before; returns ``(executed notebook, build folder)``."""
    from attnstruct import exercises

    from notebook_params import TEST_OVERRIDES

    base = tmp_path_factory.mktemp("students")
    done = {}

    def run(name):
        if name not in done:
            source = ROOT / "notebooks" / f"{name}.py"
            student = exercises.student_version(pipeline.read_notebook(source))
            quick = pipeline.load_profile(ROOT, "quick").get(name, {})
            params = {**quick, **TEST_OVERRIDES.get(name, {})}
            result = pipeline.run_notebook(
                ROOT, source, params, base, profile="quick", notebook=student, allow_errors=True
            )
            done[name] = nbformat.read(result.executed, as_version=4)
        return done[name], base

    return run


@pytest.fixture(scope="session")
def built_book(executed_build, tmp_path_factory):
    """The course book built once (:func:`attnstruct.book.build_book`) from every notebook of ``executed_build``:
    the book tests read its files, the browser tests load its pages."""
    from attnstruct import book

    for source in pipeline.list_notebooks(ROOT):
        executed_build(source.stem)
    out = tmp_path_factory.mktemp("book") / "book"
    return book.build_book(executed_build.build_dir, out, log=lambda message: None)


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
