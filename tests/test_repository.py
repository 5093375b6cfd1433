"""Repository files that users and tools read: citation, environment, README commands, CI entry point."""

import json
import re

import jsonschema
import yaml

from conftest import ROOT


def test_citation_cff_is_valid_and_cites_the_paper():
    schema = json.loads((ROOT / "tests" / "data" / "cff-schema-1.2.0.json").read_text())
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    jsonschema.Draft7Validator(schema).validate(citation)
    paper = citation["preferred-citation"]
    assert [a["family-names"] for a in paper["authors"]] == [
        "Saponati",
        "Sager",
        "Vilimelis Aceituno",
        "Stadelmann",
        "Grewe",
    ]
    assert paper["year"] == 2025 and "2502.10927" in json.dumps(paper)


def test_environment_yml_uses_conda_forge_only_and_installs_the_package():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    assert "prefix" not in env
    pip = [d for d in env["dependencies"] if isinstance(d, dict)][0]["pip"]
    assert "-e ." in pip
    names = {re.split(r"[<>=!\s]", d)[0] for d in env["dependencies"] if isinstance(d, str)}
    assert {"python", "pytorch", "xarray", "h5netcdf", "papermill", "jupytext"} <= names, names


def test_readme_names_the_two_commands_first_and_ci_runs_the_test_command():
    readme = (ROOT / "README.md").read_text()
    first_code = readme[readme.index("```") :]
    assert first_code.index("make reproduce") < first_code.index("make test") < 400
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^\s*make test\b", ci, re.M)


def test_the_readme_is_short_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert readme.count("\n") < 200, "the README is a five-minute read; longer subjects go to docs/"
    links = re.findall(r"\]\(((?!https?:)[^)#]+)\)", readme)
    assert links and all((ROOT / link).is_file() for link in links), links
    for page in ("command-line", "training", "teaching", "performance", "testing", "architecture"):
        assert f"(docs/{page}.md)" in readme, page


def test_every_guide_the_readme_links_is_a_page_of_the_book():
    from attnstruct.teaching import book

    linked = re.findall(r"\(docs/([\w-]+)\.md\)", (ROOT / "README.md").read_text())
    assert linked and set(linked) <= set(book.GUIDES), sorted(set(linked) - set(book.GUIDES))


def test_lock_pins_torch_without_a_local_build_tag():
    lock = (ROOT / "requirements" / "lock.txt").read_text().splitlines()
    torch_pins = [line for line in lock if line.startswith("torch==")]
    assert len(torch_pins) == 1 and "+" not in torch_pins[0]
