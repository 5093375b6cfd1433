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


def test_the_copy_task_configuration_defaults_are_notebook_04s_defaults():
    """A field's default is the value notebook 04 declares for it; the fields it does not set are named here."""
    from attnstruct.tasks.toy_tasks import CopyTaskConfig

    declared = notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, "04")))
    unset = []
    for field, default in _defaults(CopyTaskConfig).items():
        if field in declared:
            assert declared[field] == default, f"04: {field} = {declared[field]!r}, CopyTaskConfig has {default!r}"
        else:
            unset.append(field)
    assert unset == ["objective", "factorised", "optimizer"], unset


@pytest.mark.parametrize("notebook", ["05_training_dynamics", "06_symmetric_init", "07_vision"])
def test_a_training_notebook_sets_only_the_run_settings_where_it_departs_from_their_declaration(notebook):
    """The configuration declares the run settings once; a parameters cell that repeated a default would be a
    second source of truth (05 and 07 are their configurations' defaults and repeat none)."""
    nb = notebooks.read_notebook(notebooks.resolve_notebook(ROOT, notebook))
    (tag,) = [t for t in notebooks.parameters_cell(nb).metadata["tags"] if t in notebooks.RUN_SETTINGS_TAGS]
    settings = notebooks.run_settings(tag)
    own = notebooks.declared_parameters(_without_settings_tag(nb))
    repeated = {name: value for name, value in own.items() if name in settings and settings[name] == value}
    assert not repeated, f"{notebook} repeats the defaults {repeated}"
    if notebook != "06_symmetric_init":
        assert not set(own) & set(settings), sorted(set(own) & set(settings))


def _without_settings_tag(nb):
    cell = notebooks.parameters_cell(nb)
    cell.metadata["tags"] = ["parameters"]
    return nb


def test_a_run_setting_no_cell_or_profile_sets_takes_its_default_and_is_recorded():
    """06 assigns ``steps`` but not ``batch_size``: its recorded parameters hold both, the cell's and the default."""

    namespace = {**notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, "06")))}
    for name in notebooks.run_settings("text-training"):
        if name not in ("steps",):
            namespace.pop(name)
    recorded = notebooks.notebook_parameters("06_symmetric_init", namespace)
    assert recorded["steps"] == 300 and recorded["batch_size"] == text_config.TextConfig.batch_size
    assert "results_dir" not in recorded


@pytest.mark.parametrize("notebook", ["05_training_dynamics", "06_symmetric_init", "07_vision"])
def test_training_notebooks_declare_every_field_their_runs_take(notebook):
    """``from_params`` refuses a missing field at run time; this says so before anything runs."""
    from attnstruct.tasks import vision_config

    cls = vision_config.VisionConfig if notebook == "07_vision" else text_config.TextConfig
    declared = notebooks.declared_parameters(notebooks.read_notebook(notebooks.resolve_notebook(ROOT, notebook)))
    per_run = {*cls.RUN_KEYS, *cls.PER_RUN}
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
def test_a_run_setting_set_by_a_parameter_reaches_the_notebook_without_a_warning(tmp_path, monkeypatch, caplog):
    """``steps`` is not assigned in the cell but declared by its tag: papermill injects it, and its "unknown
    parameter" warning (which names only such settings, since undeclared names are refused first) is not shown."""
    root = make_project(
        tmp_path,
        "from pathlib import Path\nPath(results_dir).mkdir(parents=True)\n"
        "Path(results_dir, 'v.txt').write_text(str(steps))",
    )
    source = root / "notebooks" / "01_toy.py"
    source.write_text(source.read_text().replace('tags=["parameters"]', 'tags=["parameters", "text-training"]'))
    monkeypatch.chdir(root)
    assert cli.main(["notebook", "01", "-p", "steps", "7", "--build-dir", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "results" / "v.txt").read_text() == "7"
    assert not [r for r in caplog.records if "unknown parameter" in r.getMessage()]


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
    fields = set(notebooks.run_settings("text-training"))
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
