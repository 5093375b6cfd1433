"""The numbers the docs state of notebook 10: rendered from its dataset alone (verdicts as stored), rewritten between
their markers only, bad input refused in one line; the docs holding what the build renders is
tier ``findings`` (tests/test_findings.py)."""

import json
import shutil
from pathlib import Path

import pytest
from test_nb10_attention_sinks import real_table, saved_dataset

from attnstruct import results
from attnstruct.analyses import documented_numbers
from attnstruct.analyses import nb10_attention_sinks as sinks_test

from conftest import ROOT


def with_primary(ds, **changes):
    """``ds`` with the stored primary verdict's row changed (what the docs must state, whatever the runs say)."""
    verdicts = json.loads(ds.attrs["verdicts"])
    verdicts[sinks_test.PRIMARY].update(changes)
    out = ds.copy()
    out.attrs["verdicts"] = json.dumps(verdicts)
    return out


def test_the_docs_state_the_stored_primary_verdict_and_its_numbers(tmp_path):
    ds = with_primary(saved_dataset(tmp_path, real_table("smollm2-135m")), verdict="holds", estimate=0.78, low=0.38,
                      high=1.2, p_value=0.03125, n=5)  # fmt: skip
    primary = documented_numbers.docs_facts(ds, ROOT).primary
    assert (primary.verdict, primary.estimate, primary.low, primary.high) == ("holds", "+0.78", "+0.38", "+1.20")
    assert (primary.p, primary.n) == ("p = 0.031", "5 seeds")
    block = documented_numbers.docs_numbers(ds, ROOT)
    assert all(value in block for value in (primary.estimate, primary.low, primary.high, primary.p, primary.n))
    assert primary.estimate in documented_numbers.readme_clause(ds)


def test_the_docs_follow_the_stored_verdict_when_it_flips(tmp_path):
    ds = with_primary(saved_dataset(tmp_path, real_table()), verdict="does not hold", estimate=-0.5)
    primary = documented_numbers.docs_facts(ds, ROOT).primary
    assert (primary.verdict, primary.estimate) == ("does not hold", "-0.50")
    assert f"**{primary.verdict}**" in documented_numbers.docs_numbers(ds, ROOT)
    assert f"*{primary.verdict}*" in documented_numbers.readme_clause(ds)


def test_the_docs_state_each_secondary_claim_each_arm_and_each_real_model(tmp_path):
    ds = saved_dataset(tmp_path, real_table("smollm2-135m", "minilm-l6"))
    facts = documented_numbers.docs_facts(ds, ROOT)
    assert [c.claim for c in facts.secondary] == [c.name for c in sinks_test.PLAN.claims[1:]]
    assert [(o.attention, o.diagnosed, o.sink_mass) for o in facts.own] == [("`softmax`", "5 decoders", "0.500")]
    assert [(m.model, m.sink_mass) for m in facts.real] == [("`smollm2-135m`", "0.25"), ("`minilm-l6`", "1.25")]
    block = documented_numbers.docs_numbers(ds, ROOT)
    assert all(m.model in block for m in facts.real) and all(c.claim in block for c in facts.secondary)


def test_the_docs_name_the_profile_and_seeds_the_dataset_came_from_and_no_commit(tmp_path):
    ds = saved_dataset(tmp_path, real_table())
    ds.attrs["parameters"] = json.dumps({"seeds": [0, 1, 2, 3, 4], "steps": 600})
    ds.attrs["git_commit"] = "0123456789abcdef"
    facts = documented_numbers.docs_facts(ds, ROOT)
    assert (facts.profile, facts.seeds) == ("quick", "5 seeds")
    assert "0123456" not in documented_numbers.docs_numbers(ds, ROOT)
    ds.attrs["parameters"] = json.dumps({"steps": 7})
    assert documented_numbers.profile_of(ds, ROOT) == "no"


def project_copy(tmp_path) -> Path:
    """A project root holding the two documented files, the notebook and the profiles (what rendering reads)."""
    root = tmp_path / "project"
    for name in ("README.md", "docs/paper-notes.md", "notebooks/10_attention_sinks.py", "pyproject.toml"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "params", root / "params")
    return root


def test_the_rewrite_changes_only_the_text_between_the_markers(tmp_path):
    root = project_copy(tmp_path)
    saved_dataset(tmp_path, real_table("smollm2-135m"))
    before = {b.file: (root / b.file).read_text() for b in documented_numbers.BLOCKS}
    documented_numbers.rewrite(tmp_path, root)
    for block in documented_numbers.BLOCKS:
        after = (root / block.file).read_text()
        head, tail = before[block.file].split(block.begin)[0], before[block.file].split(block.end)[1]
        assert after.startswith(head + block.begin) and after.endswith(block.end + tail)
        assert after != before[block.file]
    row = next(line for line in (root / "README.md").read_text().splitlines() if block.end in line)
    assert (
        row.count("|") == 4
        and documented_numbers.readme_clause(results.load_dataset(tmp_path / "10_attention_sinks.nc")) in row
    )
    assert documented_numbers.stale(tmp_path, root) == []


@pytest.mark.parametrize("problem", ["no dataset", "no verdicts"])
def test_bad_input_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch, problem):
    root = project_copy(tmp_path)
    monkeypatch.setattr(documented_numbers.notebooks, "project_root", lambda start=None: root)
    if problem == "no verdicts":
        ds = saved_dataset(tmp_path, real_table())
        ds.attrs["verdicts"] = "{}"
        results.save_dataset(ds, tmp_path / "10_attention_sinks.nc")
    before = {b.file: (root / b.file).read_text() for b in documented_numbers.BLOCKS}
    assert documented_numbers.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ("no " in err if problem == "no dataset" else "no verdicts" in err)
    assert {b.file: (root / b.file).read_text() for b in documented_numbers.BLOCKS} == before
