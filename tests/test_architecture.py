"""The house stays readable: modules of one job and modest size, an import graph without circles that only runs
down the layers drawn in ``docs/architecture.md``, and docstrings that cite only what a reader can open."""

import ast
import re
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "attnstruct"
MAX_LINES = 1100  # one job per module whatever its length (a notebook's analysis is long); this catches a second job
ROOT_ROWS = ("top level", "foundations")  # rows of docs/architecture.md whose modules sit at the package's top level
ABSENT_DOCUMENTS = re.compile(r"paper-digest\.md|design\.md|local-checkpoints\.md|anchors\.md|target-layout|\bissue \d")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The attnstruct modules an import statement in ``module`` loads (names that are modules count as such)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "attnstruct"]
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            package = package.rsplit(".", 1)[0]
        base = f"{package}.{node.module}" if node.module else package
    elif node.module and node.module.split(".")[0] == "attnstruct":
        base = node.module
    else:
        return []
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def import_graph() -> dict[str, set[str]]:
    """Every attnstruct module's imports of other attnstruct modules, function-level imports included."""
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets.update(t for t in _resolve(name, node) if t in MODULES and t != name)
        graph[name] = targets
    return graph


def layers() -> dict[str, int]:
    """Layer of each module from the table in docs/architecture.md (``| N | module, module/ ... |``); a name
    ending in ``/`` stands for a subpackage and all its modules."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = {}
    for number, names in re.findall(r"^\| (\d+) \| ([^|]+) \|", text, re.M):
        for entry in names.split(","):
            table[entry.strip().strip("`")] = int(number)
    return table


def layer_of(module: str, table: dict[str, int]) -> int:
    short = module.removeprefix("attnstruct.")
    if short in table:
        return table[short]
    package = short.split(".")[0] + "/"
    if package in table:
        return table[package]
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_the_import_graph_has_no_circle():
    graph = import_graph()
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(target) :] + [target]))
            if target not in state:
                visit(target, path + [target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_every_import_runs_down_the_layers_of_the_architecture_map():
    table = layers()
    graph = import_graph()
    upward = []
    for module, targets in graph.items():
        if module == "attnstruct" or module.endswith("__main__"):
            continue  # the package's front door and `python -m attnstruct` sit above everything
        for target in targets:
            if target == "attnstruct":
                upward.append(f"{module} imports the package root")
            elif target.split(".")[:2] != module.split(".")[:2] and layer_of(target, table) > layer_of(module, table):
                upward.append(f"{module} ({layer_of(module, table)}) -> {target} ({layer_of(target, table)})")
    assert not upward, "imports that run back up: " + "; ".join(sorted(upward))


def test_the_architecture_map_names_only_modules_that_exist():
    known = {m.removeprefix("attnstruct.") for m in MODULES}
    known |= {m.split(".")[1] + "/" for m in MODULES if m.count(".") > 1}
    assert set(layers()) <= known, sorted(set(layers()) - known)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    lines = MODULES[module].read_text().count("\n")
    assert lines <= MAX_LINES, f"{module} has {lines} lines"


def named_in_the_map() -> set[str]:
    """The modules and folders the owns-table of docs/architecture.md names, as dotted names under ``attnstruct``:
    in a folder's row, each name in backticks outside parentheses (``scores`` in "`scores` (the two scores)");
    a row named for a module (`` `work.py` ``) names that module."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Folders and what they own", 1)[1].split("\n## ", 1)[0]
    named = set()
    for row in re.findall(r"^\| (`?[^|`]+`?) \| (.*) \|$", section, re.M):
        head, body = row[0].strip("`"), row[1]
        if head in ("folder", "---"):
            continue
        if head.endswith(".py"):
            named.add(head.removesuffix(".py"))
            continue
        prefix = "" if head in ROOT_ROWS else head.rstrip("/").replace("/", ".") + "."
        depth = 0
        for token in re.finditer(r"\(|\)|`([^`]+)`", body):
            depth += {"(": 1, ")": -1}.get(token.group(0), 0)
            if token.group(1) and depth == 0:
                named.add(prefix + token.group(1).rstrip("/").replace("/", "."))
    return named


def test_the_map_names_every_module_in_its_folders_row():
    faces = {m.removeprefix("attnstruct.") for m, p in MODULES.items() if p.name == "__init__.py"}
    modules = {m.removeprefix("attnstruct.") for m in MODULES} - faces - {"__main__"}
    assert not modules - named_in_the_map(), sorted(modules - named_in_the_map())


def test_every_name_in_the_map_is_a_module_or_a_folder():
    known = {m.removeprefix("attnstruct.") for m in MODULES}
    assert not named_in_the_map() - known, sorted(named_in_the_map() - known)


def shared_basenames(paths) -> dict[str, list[str]]:
    """The file names that more than one module carries (``__init__.py``, every package's face, excepted), each with
    the folders that hold it."""
    folders: dict[str, list[str]] = {}
    for path in paths:
        if path.name != "__init__.py":
            folders.setdefault(path.name, []).append(str(path.parent.relative_to(PACKAGE)))
    return {name: where for name, where in folders.items() if len(where) > 1}


def test_no_two_modules_share_a_basename():
    """A module's file name alone says which module it is: ``plans`` in two folders makes a reader open both."""
    shared = shared_basenames(MODULES.values())
    assert not shared, shared


def test_every_module_says_its_one_job_in_the_first_line_of_its_docstring():
    silent = [m for m, path in MODULES.items() if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()]
    assert not silent, silent


def test_sources_cite_only_what_is_in_the_repository():
    places = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.json"), *(ROOT / "notebooks").glob("*.py"), ROOT / "README.md"]
    places += [*(ROOT / "docs").glob("*.md"), *(ROOT / "benchmarks").glob("*.py")]
    cited = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in places for m in ABSENT_DOCUMENTS.finditer(p.read_text())]
    assert not cited, cited


def test_tasks_catch_no_checkpoint_error_type():
    """A corpus reads the hub through the hub client and turns its HubError into a CorpusError: no module of
    ``tasks/`` names the error of reading a checkpoint."""
    naming = [
        m
        for m, path in MODULES.items()
        if m.startswith("attnstruct.tasks")
        and any(
            isinstance(node, ast.ImportFrom) and any(a.name == "ExtractionError" for a in node.names)
            for node in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert not naming, naming


NOTEBOOK_MODULE = re.compile(r"attnstruct\.analyses\.(nb\d\d)_\w+$")


def _notebook_imports(path: Path) -> set[str]:
    """The ``analyses.nbNN_*`` modules a notebook source imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if NOTEBOOK_MODULE.match(name)}


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")), ids=lambda p: p.stem)
def test_a_notebook_imports_one_analysis_module_and_it_is_its_own(path):
    own = [name for name in MODULES if name.startswith(f"attnstruct.analyses.nb{path.stem[:2]}_")]
    assert len(own) == 1, f"analyses/ holds {own} for {path.stem}: one module per notebook"
    assert _notebook_imports(path) == set(own), f"{path.stem} imports {sorted(_notebook_imports(path))}"


def test_no_notebooks_analysis_module_imports_another_notebooks():
    crossing = {
        (module, target)
        for module, targets in import_graph().items()
        if NOTEBOOK_MODULE.match(module)
        for target in targets
        if NOTEBOOK_MODULE.match(target) and NOTEBOOK_MODULE.match(target)[1] != NOTEBOOK_MODULE.match(module)[1]
    }
    assert not crossing, sorted(crossing)
