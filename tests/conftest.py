"""Fixtures shared by the test modules, and the order and groups in which pytest-xdist runs the tests.

Nothing heavy is imported at module level: the pytest-xdist controller loads this file too, before it starts
the workers, and runs no test.
"""

import contextlib
import os
import tempfile
from pathlib import Path

import pytest

import notebook_params
from shared_runs import SharedWork, session_folder

ROOT = Path(__file__).resolve().parents[1]
notebook_params.pin_kernel_threads()  # kernels and subprocesses: one thread each (notebook_params.KERNEL_ENVIRONMENT)
# a notebook run without output folders writes to the work folder (attnstruct.work): a temporary one, never the user's
os.environ["ATTNSTRUCT_WORK"] = tempfile.mkdtemp(prefix="attnstruct-work-")


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread_per_worker():
    """One torch thread in each worker process: the two pytest-xdist workers share the two cores."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's training runs (bit-reproducible on a CPU), restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def shared_work(tmp_path_factory) -> SharedWork:
    """Work done once per session for every pytest-xdist worker (:class:`shared_runs.SharedWork`)."""
    return SharedWork(session_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def executed_build(shared_work):
    """One build folder of notebooks executed with the tests' parameters (:func:`notebook_params.parameters`).

    ``executed_build(name)`` runs notebook ``name`` there once per session, whichever worker asks first, and
    returns ``(RunResult, parameters)``; later calls, in any worker, reuse the run (a failure is raised again, not
    retried). The notebook, claim, book, exercise and browser tests read the executed notebooks, figures and
    datasets under ``executed_build.build_dir``, laid out as ``make reproduce`` lays out ``build/quick/``.
    """
    from attnstruct import notebooks

    build = shared_work.folder("build")

    def run(name: str):
        for needed in NEEDS.get(name, ()):
            run(needed)  # its stored runs are this notebook's input
        params = notebook_params.parameters(ROOT, name)

        def execute(_folder):
            result = notebooks.run_notebook(
                ROOT, notebooks.resolve_notebook(ROOT, name), params, build, profile="quick"
            )
            return {key: str(value) if isinstance(value, Path) else value for key, value in vars(result).items()}

        done = shared_work.once(f"build-{name}", execute)
        result = notebooks.RunResult(done["name"], Path(done["executed"]), Path(done["html"]), done["seconds"])
        return result, params

    run.build_dir = build
    return run


# What a build stores for a later run of a notebook to reuse (results/ folders), and another notebook's dataset
# that a notebook reads (09 reads 05's parameters from it).
STORED_WORK = ("text_runs", "toy_runs", "vision_runs", "exercise_runs", "08_model_sweep", "09_dynamics_at_scale")
READS = {"09_dynamics_at_scale": ("05_training_dynamics.nc",)}


def copy_stored_work(build: Path, work: Path, name: str) -> None:
    """The stored results of ``build`` that notebook ``name`` reuses, copied into the work folder ``work``: every
    folder of :data:`STORED_WORK` (the hidden temporary files of atomic writes skipped, and any file another
    worker's run removes meanwhile, such as a checkpoint at the end of its run) and the datasets of :data:`READS`."""
    import shutil

    def copy(src, dst):
        try:
            shutil.copy2(src, dst)
        except FileNotFoundError:
            pass

    for folder in STORED_WORK:
        if (build / "results" / folder).is_dir():
            shutil.copytree(
                build / "results" / folder,
                work / "results" / folder,
                ignore=shutil.ignore_patterns(".*"),
                copy_function=copy,
                dirs_exist_ok=True,
            )
    for dataset in READS.get(name, ()):
        (work / "results").mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "results" / dataset, work / "results" / dataset)


@contextlib.contextmanager
def stored_runs_only(work: Path):
    """Notebooks started in the block write to the work folder ``work`` and may not train
    (``ATTNSTRUCT_WORK``, ``ATTNSTRUCT_STORED_RUNS_ONLY=1``; kernels inherit the environment)."""
    saved = {key: os.environ.get(key) for key in ("ATTNSTRUCT_WORK", "ATTNSTRUCT_STORED_RUNS_ONLY")}
    os.environ.update(ATTNSTRUCT_WORK=str(work), ATTNSTRUCT_STORED_RUNS_ONLY="1")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def student_runs(shared_work, executed_build):
    """``student_runs(name)``: the student version of notebook ``name`` as ``make exercises`` writes it (its course
    version with solutions stubbed, :func:`attnstruct.teaching.exercises.student_version`) run once per session
    with the parameters of ``executed_build``, as a student opens it after a build: in a fresh kernel, its output
    folders left to their default (a work folder holding a copy of the build's stored runs,
    :func:`copy_stored_work`) and nothing allowed to train (:func:`stored_runs_only`), every cell executed whatever
    raised before; returns ``(executed notebook, work folder)``. Its dataset and figures are in the work folder's
    ``results/`` and ``figures/``."""
    import nbformat

    from attnstruct import notebooks
    from attnstruct.teaching import course_notebooks, exercises

    base = shared_work.folder("students")

    def run(name):
        executed_build(name)  # the stored runs it reads

        def execute(_folder):
            source = ROOT / "notebooks" / f"{name}.py"
            student = exercises.student_version(course_notebooks.course_notebook(ROOT, source))
            params = {**notebook_params.parameters(ROOT, name), "results_dir": None, "figures_dir": None}
            work = base / name / "work"
            copy_stored_work(executed_build.build_dir, work, name)
            with stored_runs_only(work):
                result = notebooks.run_notebook(
                    ROOT, source, params, base / name, profile="quick", notebook=student, allow_errors=True
                )
            return [str(result.executed), str(work)]

        executed, work = shared_work.once(f"student-{name}", execute)
        return nbformat.read(executed, as_version=4), Path(work)

    return run


@pytest.fixture(scope="session")
def built_book(executed_build, shared_work):
    """The two course books built once per session (:func:`attnstruct.teaching.book.build_books`) from every
    notebook of ``executed_build``: the folder holding ``instructor/``, ``student/`` and the ``index.html`` that
    links them. The book tests read their files, the browser tests load their pages."""
    from attnstruct import notebooks
    from attnstruct.teaching import book

    def build(folder):
        for source in notebooks.list_notebooks(ROOT):
            executed_build(source.stem)
        return str(book.build_books(executed_build.build_dir, folder / "book", log=lambda message: None))

    return Path(shared_work.once("book", build))


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(12345)


# Tiny hub repositories and a stand-in hub serving them (test_hub.py, test_sweep.py).
CAUSAL = ("gpt2", "llama")
SEQ2SEQ = ("bart",)


def tiny(name: str, seed: int = 0, **overrides):
    """A tiny model of ``name`` with its head (lm_head, tied embeddings) as a hub repository would hold it."""
    import torch
    import transformers as T
    from extract_models import CASES

    torch.manual_seed(seed)
    config = CASES[name].config()
    for key, value in overrides.items():
        setattr(config, key, value)
    if name in CAUSAL:
        return T.AutoModelForCausalLM.from_config(config)
    if name in SEQ2SEQ:
        return T.AutoModelForSeq2SeqLM.from_config(config)
    return T.AutoModel.from_config(config)


@pytest.fixture(scope="session")
def repos(tmp_path_factory):
    """Local folders of the models the stand-in hub serves, by repo id (read-only: a test copies what it edits)."""
    import torch
    from safetensors.torch import load_file

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
def loopback_http(monkeypatch):
    """Requests to 127.0.0.1 go straight there, whatever proxy the environment names; huggingface_hub's shared
    client, which read the proxy settings when it was made, is made again before and after the test."""
    from huggingface_hub.utils import close_session

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    close_session()
    yield
    close_session()


@pytest.fixture
def byte_exact_reads(monkeypatch):
    """Reads of one file merged only when at most 4 KB apart, not by the cost model of a request's round trip
    (:data:`attnstruct.checkpoints.remote_tensors.MERGE_GAP`, 1.25 MB, which merges every read of a tiny model):
    for the tests of which bytes a range read needs."""
    from attnstruct.checkpoints import remote_tensors

    monkeypatch.setattr(remote_tensors, "MERGE_GAP", 4096)


@pytest.fixture
def hub(repos, tmp_path, monkeypatch, loopback_http):
    """A running stand-in hub with every repository of ``repos``, and the environment pointed at it.

    One per test: tests add repositories, truncate transfers and count requests. Starting one costs a few
    milliseconds; the models it serves (``repos``) are built once per session. The hub client's waits between
    retries are recorded in ``server.waits`` instead of slept.
    """
    import huggingface_hub.constants
    from standin_hub import StandinHub

    from attnstruct.hub_client import client as hub_client

    with StandinHub() as server:
        server.waits = []
        monkeypatch.setattr(hub_client, "DEFAULT_POLICY", hub_client.RetryPolicy(sleep=server.waits.append))
        for repo, folder in repos.items():
            server.add_folder(repo, folder)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "attnstruct-cache"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # online, but only to the stand-in on loopback
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # read at import from the environment
        monkeypatch.setenv("HF_TOKEN", "hf_test_token_not_real")
        yield server


# Scheduling under pytest-xdist (`make check` and `make test` run `--dist loadgroup --no-loadscope-reorder`):
# a group of tests is run whole by one worker. The tests of one notebook (its shared-build run, its
# student version, their checks) form one group, so two workers never wait for each other's execution of one
# notebook; the book and its browser tests form another; the nbgrader course, the handouts and the exercises'
# outcomes over seeds form one each, so their module fixture is built once; every other test is grouped by its
# module, so a module's fixtures are built once. Groups are sent in this order: the notebooks, longest first; the other
# executions; the book, whose notebooks are built by then; the other modules, longest first. The short ones fill
# the workers' time at the end.
LONGEST_FIRST = (
    "05_training_dynamics",
    "06_symmetric_init",
    "07_vision",
    "04_gradient_structure",
    "03_pretrained_models",
    "02_scores",
    "01_bilinear_form",
    "08_model_sweep",
    "09_dynamics_at_scale",  # last: it reads notebook 05's runs (NEEDS), which are under way by then
    "10_attention_sinks",  # reuses notebook 05's runs as its softmax arm (NEEDS)
)
NEEDS = {
    "09_dynamics_at_scale": ("05_training_dynamics",),
    "10_attention_sinks": ("05_training_dynamics",),
}  # notebooks whose stored results another one reads
LONGEST_MODULES = ("test_text", "test_vision", "test_zoo", "test_sweep", "test_install", "test_training_evidence")
SHARED_RUNS = {"executed_build", "student_runs"}
MODULE_FIXTURE_GROUPS = ("test_course", "test_handouts", "test_exercise_outcomes")


def _schedule(item) -> tuple[int, int, str]:
    """``(rank, position, group)`` of a test."""
    name = getattr(getattr(item, "callspec", None), "params", {}).get("name")
    module = item.path.stem
    if module in MODULE_FIXTURE_GROUPS and item.get_closest_marker("notebook"):
        # before the notebook groups: a test of the course parametrised by notebook name would join that
        # notebook's group, and its worker would build the course's module fixture once more
        return 1, 0, module
    if name in LONGEST_FIRST and SHARED_RUNS & set(item.fixturenames):
        return 0, LONGEST_FIRST.index(name), name
    if module == "test_book" or (module == "test_browser" and item.name.startswith("test_book")):
        return 2, 0, "book"
    if item.get_closest_marker("notebook"):
        return 1, 0, ""  # in no group: each is sent alone
    position = LONGEST_MODULES.index(module) if module in LONGEST_MODULES else len(LONGEST_MODULES)
    return 3, position, module


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups
def pytest_collection_modifyitems(config, items):
    keys = {item.nodeid: _schedule(item) for item in items}
    grouping = config.pluginmanager.has_plugin("xdist")
    for item in items:
        rank, _, group = keys[item.nodeid]
        if group and grouping:
            item.add_marker(pytest.mark.xdist_group(group))
        if rank == 2:  # the first book test may wait for every notebook of the shared build
            item.add_marker(pytest.mark.timeout(900))
    items.sort(key=lambda item: keys[item.nodeid][:2])
