"""The papermill runner: profiles, parameter checks, failures reported with notebook and cell."""

import textwrap

import pytest
import yaml

from attnstruct import cli, notebooks
from attnstruct.tasks import text_config

from conftest import ROOT

HEADER = textwrap.dedent(
    """\
    # ---
    # jupyter:
    #   kernelspec:
    #     display_name: Python 3
    #     language: python
    #     name: python3
    # ---
    """
)


def make_project(tmp_path, body):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "params").mkdir()
    (tmp_path / "params" / "quick.yaml").write_text("01_toy:\n  value: 2\n")
    source = HEADER + '\n# %% tags=["parameters"]\nvalue = 1\nresults_dir = "out"\n\n# %%\n' + body + "\n"
    (tmp_path / "notebooks" / "01_toy.py").write_text(source)
    return tmp_path


def test_the_quick_profile_is_the_notebook_defaults_and_the_paper_and_course_profiles_hold_deltas_only():
    quick = notebooks.load_profile(ROOT, "quick")
    deltas = {name: notebooks.load_profile(ROOT, name) for name in ("paper", "course")}
    sources = notebooks.list_notebooks(ROOT)
    assert [p.stem for p in sources][:3] == ["01_bilinear_form", "02_scores", "03_pretrained_models"]
    assert quick == {}, "params/quick.yaml must hold no copy of the notebook defaults"
    for path in sources:
        declared = notebooks.declared_parameters(notebooks.read_notebook(path))
        assert {"results_dir", "figures_dir"} <= set(declared), path.stem
        for profile, values in deltas.items():
            for name, value in values.get(path.stem, {}).items():
                assert name in declared, f"params/{profile}.yaml: {path.stem} has no parameter {name}"
                assert declared[name] != value, f"params/{profile}.yaml: {path.stem}.{name} = {value!r} is the default"


@pytest.mark.parametrize("profile", ["gpu", "smoke"])
def test_a_profile_that_extends_another_holds_only_its_changes(profile):
    """``extends: paper``: each value of the file is a parameter of its notebook and differs from the paper's."""
    own = yaml.safe_load((ROOT / "params" / f"{profile}.yaml").read_text())
    base = notebooks.load_profile(ROOT, own.pop("extends"))
    for stem, values in own.items():
        declared = notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, stem)))
        for name, value in values.items():
            assert name in declared, f"params/{profile}.yaml: {stem} has no parameter {name}"
            assert base.get(stem, {}).get(name, declared[name]) != value, f"params/{profile}.yaml: {stem}.{name}"


def _defaults(config_class) -> dict:
    return {f: getattr(config_class(), f) for f in config_class.field_names()}


@pytest.mark.parametrize(
    "notebook, config_class, plural",
    [
        ("05_training_dynamics", "tasks.text_config.TextConfig", {"objective": "objectives", "seed": "seeds"}),
        ("07_vision", "tasks.vision_config.VisionConfig", {}),
        ("04_gradient_structure", "tasks.toy_tasks.CopyTaskConfig", {}),
    ],
)
def test_the_configuration_defaults_are_their_notebook_defaults(notebook, config_class, plural):
    """A configuration's default for a field is the value the notebook declares for it (or the first of the
    notebook's list, e.g. ``objectives``); fields the notebook does not set are named here, so none drifts."""
    import importlib

    module, name = config_class.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"attnstruct.{module}"), name)
    declared = notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, notebook)))
    unset = []
    for field, default in _defaults(cls).items():
        if field in declared:
            assert declared[field] == default, f"{notebook}: {field} = {declared[field]!r}, {name} has {default!r}"
        elif field in plural:
            assert declared[plural[field]][0] == default, f"{notebook}: {plural[field]}[0] is not {name}.{field}"
        else:
            unset.append(field)
    expected_unset = {
        "tasks.text_config.TextConfig": ["init", "init_seed", "init_from"],
        "tasks.vision_config.VisionConfig": ["objective"],
    }
    assert unset == expected_unset.get(config_class, ["objective", "factorised", "optimizer"]), unset


@pytest.mark.parametrize("notebook", ["05_training_dynamics", "06_symmetric_init", "07_vision"])
def test_training_notebooks_declare_every_field_their_runs_take(notebook):
    """``from_params`` refuses a missing field at run time; this says so before anything runs."""
    from attnstruct.tasks import text_config, vision_config

    cls = vision_config.VisionConfig if notebook == "07_vision" else text_config.TextConfig
    declared = notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, notebook)))
    per_run = {"objective", "seed", "init", *cls.PER_RUN}
    assert set(cls.field_names()) - per_run <= set(declared), sorted(set(cls.field_names()) - per_run - set(declared))


def test_profile_errors(tmp_path):
    with pytest.raises(notebooks.PipelineError, match="no parameter profile 'huge'"):
        notebooks.load_profile(ROOT, "huge")
    bad = tmp_path / "bad.yaml"
    bad.write_text("99_nothing:\n  x: 1\n")
    with pytest.raises(notebooks.PipelineError, match="unknown notebooks"):
        notebooks.load_profile(ROOT, str(bad))
    bad.write_text("02_scores: [1, 2]\n")
    with pytest.raises(notebooks.PipelineError, match="must map"):
        notebooks.load_profile(ROOT, str(bad))
    with pytest.raises(notebooks.PipelineError, match="unknown notebook '42'"):
        notebooks.resolve_notebook(ROOT, "42")
    assert notebooks.resolve_notebook(ROOT, "02").stem == "02_scores"


def test_a_profile_extends_another_and_overrides_its_values(tmp_path):
    root = make_project(tmp_path, "print(value)")
    (root / "params" / "base.yaml").write_text("01_toy:\n  value: 3\n  results_dir: base\n")
    (root / "params" / "small.yaml").write_text("extends: base\n01_toy:\n  value: 4\n")
    assert notebooks.load_profile(root, "small") == {"01_toy": {"value": 4, "results_dir": "base"}}
    (root / "params" / "loop.yaml").write_text("extends: loop\n")
    with pytest.raises(notebooks.PipelineError, match="extends must name another profile"):
        notebooks.load_profile(root, "loop")


def test_unknown_parameter_is_refused_before_running(tmp_path):
    source = notebooks.resolve_notebook(ROOT, "02_scores")
    with pytest.raises(notebooks.PipelineError, match="no parameters \\['n_draw'\\]"):
        notebooks.run_notebook(ROOT, source, {"n_draw": 3}, tmp_path)
    assert not (tmp_path / "notebooks").exists()


@pytest.mark.parametrize(
    "name, value, kind",
    [
        ("n_draws", "many", "an integer"),
        ("n_draws", 2.5, "an integer"),
        ("n_draws", True, "an integer"),
        ("d_models", 64, "a list of integers"),
        ("d_models", [64, "x"], "a list of integers"),
        ("num_stds", [0.5, float("nan")], "a list of finite numbers"),
        ("seed", None, "an integer"),
    ],
)
def test_a_parameter_of_the_wrong_type_is_refused_before_running(tmp_path, name, value, kind):
    source = notebooks.resolve_notebook(ROOT, "02_scores")
    with pytest.raises(notebooks.PipelineError, match=f"notebook 02_scores: parameter {name} must be {kind}"):
        notebooks.run_notebook(ROOT, source, {name: value}, tmp_path)
    assert not (tmp_path / "notebooks").exists()


def test_a_parameter_takes_its_defaults_kind_an_integer_for_a_float_and_anything_single_for_none():
    declared = {"n": 3, "rate": 0.5, "names": ["a"], "empty": [], "path": None, "flag": False}
    good = {"n": 4, "rate": 1, "names": ["b", "c"], "empty": [1, "x"], "path": "somewhere", "flag": True}
    notebooks.check_parameter_types("nb", good, declared)
    for bad in ({"rate": float("inf")}, {"path": [1]}, {"flag": 1}, {"names": "a"}):
        with pytest.raises(notebooks.PipelineError, match=f"parameter {next(iter(bad))} must be"):
            notebooks.check_parameter_types("nb", bad, declared)


def test_every_profile_gives_each_parameter_its_defaults_kind():
    for profile in ("quick", "paper", "course", "gpu", "smoke"):
        for stem, values in notebooks.load_profile(ROOT, profile).items():
            declared = notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, stem)))
            notebooks.check_parameter_types(stem, values, declared)


@pytest.mark.notebook
def test_failing_notebook_names_notebook_and_cell(tmp_path, monkeypatch, capsys):
    root = make_project(tmp_path, 'raise ValueError(f"value {value}\\nis bad")')
    monkeypatch.chdir(root)
    assert cli.main(["reproduce", "--build-dir", str(tmp_path / "build")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "FAILED notebook 01_toy failed at cell" in err and "ValueError: value 2 is bad" in err
    assert (tmp_path / "build" / "notebooks" / "01_toy.ipynb").is_file()  # kept for inspection
    assert not (tmp_path / "build" / "html").exists()


@pytest.mark.notebook
def test_cli_one_notebook_with_parameters(tmp_path, monkeypatch, capsys):
    root = make_project(
        tmp_path,
        "from pathlib import Path\nPath(results_dir).mkdir(parents=True)\n"
        "Path(results_dir, 'v.txt').write_text(str(value))",
    )
    monkeypatch.chdir(root)
    assert cli.main(["notebook", "01", "-p", "value", "3", "--build-dir", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "results" / "v.txt").read_text() == "3"
    assert (tmp_path / "b" / "html" / "01_toy.html").is_file()
    assert "done in" in capsys.readouterr().out


def test_cli_bad_input_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    for argv in (["reproduce", "--profile", "nope"], ["notebook", "77"], ["notebook", "02", "-p", "n_draw", "3"]):
        assert cli.main(argv + ["--build-dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("attnstruct: error:"), err


def test_list_from_a_folder_outside_the_checkout_lists_the_notebooks_of_the_checkout_installed_from(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list"]) == 0
    listed = [line.split(":", 1)[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == [p.stem for p in notebooks.list_notebooks(ROOT)]


def test_root_names_the_project_whose_notebooks_list_notebook_and_reproduce_use(tmp_path, monkeypatch, capsys):
    (tmp_path / "project").mkdir()
    root = make_project(tmp_path / "project", "")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list", "--root", str(root)]) == 0
    assert capsys.readouterr().out.splitlines() == ["01_toy: value, results_dir"]
    assert cli.main(["notebook", "02", "--root", str(root)]) == 2  # ROOT's 02 is not in that project
    assert "known notebooks: 01_toy" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["list"], ["notebook", "01"], ["reproduce"]])
def test_a_root_without_notebooks_and_params_exits_2_with_one_line(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main([*command, "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("attnstruct: error: --root"), err
    assert not (tmp_path / "build").exists()


def test_outside_any_checkout_and_without_root_list_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(notebooks, "INSTALLED_CHECKOUT", tmp_path / "site-packages")  # a non-editable install
    monkeypatch.chdir(tmp_path)
    assert cli.main(["list"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no project root" in err and "--root" in err, err


def test_profiles_are_valid_yaml_mappings():
    assert yaml.safe_load((ROOT / "params" / "quick.yaml").read_text()) == {}
    data = yaml.safe_load((ROOT / "params" / "paper.yaml").read_text())
    assert isinstance(data, dict) and data


def test_in_the_paper_profile_notebook_06_reuses_notebook_05s_runs_because_their_run_settings_agree():
    """The quick profile trains 06's own smaller model; the paper profile trains 05's, whose runs 06 then reuses."""
    declared = {
        name: notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, name)))
        for name in ("05_training_dynamics", "06_symmetric_init")
    }
    fields = set(text_config.TextConfig.field_names()) - {"objective", "init", "seed", *text_config.TextConfig.PER_RUN}
    assert declared["05_training_dynamics"]["seeds"] == declared["06_symmetric_init"]["seeds"]
    paper = notebooks.load_profile(ROOT, "paper")
    runs = {name: {**declared[name], **paper[name]} for name in declared}
    assert set(runs["05_training_dynamics"]["objectives"]) <= set(runs["06_symmetric_init"]["objectives"])
    differ = {
        f: (runs["05_training_dynamics"][f], runs["06_symmetric_init"][f])
        for f in fields
        if runs["05_training_dynamics"][f] != runs["06_symmetric_init"][f]
    }
    assert not differ, f"in the paper profile, notebooks 05 and 06 would train different baselines: {differ}"


def test_a_notebook_run_outside_the_repository_finds_its_sources_in_the_checkout_of_the_package(tmp_path):
    """A course folder or nbgrader's autograded/ has no notebooks/ above it: the editable install's checkout does."""
    assert notebooks.project_root(tmp_path) == ROOT
    with pytest.raises(notebooks.PipelineError, match="are not defined"):
        notebooks.notebook_parameters("01_bilinear_form", {}, tmp_path)


def test_reproduce_checks_every_notebooks_parameters_before_the_first_one_runs(tmp_path):
    root = make_project(tmp_path, "raise RuntimeError('ran')")
    (root / "notebooks" / "02_second.py").write_text((root / "notebooks" / "01_toy.py").read_text())
    (root / "params" / "bad.yaml").write_text("02_second:\n  value: many\n")
    with pytest.raises(notebooks.PipelineError, match="notebook 02_second: parameter value must be an integer"):
        notebooks.reproduce(root, "bad", tmp_path / "build", log=lambda *a, **k: None)
    assert not (tmp_path / "build").exists()
