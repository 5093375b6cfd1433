"""Help that teaches: a plain-text description, every subcommand described with worked examples that its own parser
accepts, every option with a meaning (and its choices where it has a fixed set), and one error prefix for every
command, ``attnstruct: error: ...``, exit status 2."""

from __future__ import annotations

import re
import shlex

import pytest

from attnstruct import cli
from attnstruct.cli import dispatch, fetch, help_text, prepare, train


def help_of(capsys, *argv: str) -> str:
    assert cli.main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def parse_example(line: str):
    """Parse one example line with the real parser of its command (parse only: nothing runs)."""
    words = shlex.split(line)
    assert words[0] == "attnstruct", line
    command, rest = words[1], words[2:]
    if command == "fetch-models":
        return fetch._parser().parse_args(rest)
    if command == "prepare-corpus":
        return prepare._parser().parse_args(rest)
    if command == "train":
        task = rest[rest.index("--task") + 1] if "--task" in rest else "text"
        return train.parser(task).parse_args(rest)
    return dispatch._parser().parse_args(words[1:])


def test_the_program_description_is_plain_text_and_whole(capsys):
    out = help_of(capsys)
    assert "``" not in out and ":mod:" not in out and ":class:" not in out
    assert " ".join(help_text.DESCRIPTION.split()) in " ".join(out.split())


@pytest.mark.parametrize("command", dispatch.COMMANDS)
def test_every_command_describes_itself_and_shows_two_examples(capsys, command):
    out = help_of(capsys, command)
    assert " ".join(help_text.DESCRIPTIONS[command].split()) in " ".join(out.split())
    shown = [line.strip() for line in out.splitlines() if line.startswith("  attnstruct ")]
    assert len(shown) >= 2 and shown == list(help_text.EXAMPLES[command])


@pytest.mark.parametrize("line", [line for lines in help_text.EXAMPLES.values() for line in lines])
def test_every_example_is_accepted_by_its_parser(line):
    assert parse_example(line) is not None


def options_of(parser) -> list:
    return [action for action in parser._actions if action.option_strings and action.dest != "help"]


@pytest.mark.parametrize(
    "command", [c for c in dispatch.COMMANDS if c not in ("fetch-models", "prepare-corpus", "train")]
)
def test_every_option_of_the_shared_parser_says_what_it_means(command):
    sub = dispatch._parser()._subparsers._group_actions[0].choices[command]
    for action in options_of(sub):
        assert action.help and action.help.strip(), f"{command} {action.option_strings} has no help"


@pytest.mark.parametrize(
    "make", [fetch._parser, prepare._parser, lambda: train.parser("text"), lambda: train.parser("vision")]
)
def test_every_option_of_the_own_parsers_says_what_it_means(make):
    for action in options_of(make()):
        assert action.help and action.help.strip(), f"{action.option_strings} has no help"
        assert not action.help.startswith("default "), f"{action.option_strings}: only a default: {action.help}"


UNKNOWN_OPTION = {command: [command, "--no-such-option"] for command in dispatch.COMMANDS}
UNKNOWN_OPTION["notebook"] = ["notebook", "02", "--no-such-option"]
UNKNOWN_OPTION["revisions"] = ["revisions", "EleutherAI/pythia-160m", "--no-such-option"]
UNKNOWN_OPTION["score"] = ["score", "minilm-l6", "--no-such-option"]
UNKNOWN_OPTION["sweep"] = ["sweep", "models.txt", "--out", "o", "--no-such-option"]
UNKNOWN_OPTION["train"] = ["train", "--run-dir", "r", "--no-such-option"]


def bad_input(command: str, tmp_path) -> list[str]:
    """A command line that parses but that the command refuses when it runs (nothing is fetched or trained)."""
    junk = tmp_path / "x.safetensors"
    junk.write_text("junk")
    return {
        "score": ["score", str(junk)],
        "sweep": ["sweep", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "out")],
        "revisions": ["revisions", "not/a/valid/repo"],
        "fetch-models": ["fetch-models", "no-such-model"],
        "prepare-corpus": ["prepare-corpus", "my-texts/"],
        "train": ["train", "--run-dir", str(tmp_path / "run"), "--steps", "0"],
        "reproduce": ["reproduce", "--profile", "no-such-profile"],
        "notebook": ["notebook", "99_nope"],
        "list": ["list", "--root", str(tmp_path)],
    }[command]


@pytest.mark.parametrize("kind", ["unknown option", "bad input"])
@pytest.mark.parametrize("command", dispatch.COMMANDS)
def test_every_command_refuses_with_one_prefix(capsys, tmp_path, monkeypatch, command, kind):
    monkeypatch.chdir(tmp_path)
    argv = UNKNOWN_OPTION[command] if kind == "unknown option" else bad_input(command, tmp_path)
    status = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1, err
    assert lines[0].startswith("attnstruct: error: ") and lines[0] != "attnstruct: error: ", lines[0]


@pytest.mark.parametrize("task", train.TASKS)
def test_train_shows_the_choices_its_configuration_allows(task, capsys):
    from dataclasses import fields

    from attnstruct.tasks import preprocessing, text_config, vision_config
    from attnstruct.training import model_config, run_config

    config_class = train._config_class(task)
    allowed = {"schedule": run_config.SCHEDULES, "norm": run_config.NORMS, "attention": model_config.ATTENTIONS}
    if task == "text":
        allowed |= {
            "objective": text_config.OBJECTIVES,
            "init": text_config.INITS,
            "preprocessing": tuple(preprocessing.PREPROCESSING),
        }
    else:
        allowed |= {"objective": vision_config.OBJECTIVES, "source": vision_config.SOURCES}
    shown = {a.dest: tuple(a.choices) for a in options_of(train.parser(task)) if a.choices and a.dest != "task"}
    assert shown == allowed
    out = re.sub(r"-\s+", "-", " ".join(help_of(capsys, "train", "--task", task).split()))  # argparse breaks at "-"
    for name, choices in allowed.items():
        assert f"one of {', '.join(choices)}" in out, name
    assert {f.name for f in fields(config_class)} <= set(help_text.MEANINGS)
