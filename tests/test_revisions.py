"""Checkpoint series: the training position of revision, folder and repository names, a repository's revisions in
training order through the stand-in hub, and lists cut into shards."""

import math

import pytest

from attnstruct.checkpoints import revisions
from attnstruct.checkpoints.extract import ExtractionError
from attnstruct.checkpoints.revisions import TrainingPosition

NAN = math.nan

POSITIONS = [  # every example of parse_training_position's docstring, and a few more
    ("step143000", (143000, NAN, 0)),
    ("step20000-tokens84B", (20000, 84e9, 0)),
    ("stage1-step120000-tokens252B", (120000, 252e9, 0)),
    ("stage2-ingredient1-step11931-tokens50B", (11931, 50e9, 1)),
    ("ext1000", (1000, NAN, 1)),
    ("decay100", (100, NAN, 2)),
    ("multiberts-seed_0-step_20k", (20000, NAN, 0)),
    ("runs/pythia/step1000", (1000, NAN, 0)),
    ("step1000-tokens1.5T", (1000, 1.5e12, 0)),
    ("main", (NAN, NAN, NAN)),
    ("v1.0", (NAN, NAN, NAN)),
    ("step0", (0, NAN, 0)),
    ("step_2000k", (2e6, NAN, 0)),
    ("STEP5-Tokens3m", (5, 3e6, 0)),
    ("tokens84B", (NAN, 84e9, NAN)),
    ("pythia-160m-deduped", (NAN, NAN, NAN)),
    ("stepping", (NAN, NAN, NAN)),
]


def same(got, expected) -> bool:
    return all((math.isnan(g) and math.isnan(e)) or g == e for g, e in zip(got, expected, strict=True))


@pytest.mark.parametrize("name, expected", POSITIONS)
def test_the_training_position_of_a_name(name, expected):
    got = revisions.parse_training_position(name)
    assert isinstance(got, TrainingPosition) and same(got, expected), got


@pytest.mark.parametrize(
    "model, revision, expected",
    [  # every example of model_position's docstring
        ("EleutherAI/pythia-160m@step1000", "step1000", (1000, NAN, 0)),
        ("google/multiberts-seed_0-step_20k", "", (20000, NAN, 0)),
        ("/data/olmo/step20000-tokens84B", "", (20000, 84e9, 0)),
        ("gpt2", "", (NAN, NAN, NAN)),
        ("google/multiberts-seed_1-step_40k@main", "main", (40000, NAN, 0)),
        ("allenai/OLMo-1B-hf@step20000-tokens84B", "step20000-tokens84B", (20000, 84e9, 0)),
    ],
)
def test_the_position_of_a_model_line(model, revision, expected):
    got_revision, position = revisions.model_position(model)
    assert got_revision == revision and same(position, expected), (got_revision, position)


def test_training_order_puts_later_phases_after_pretraining_and_unknown_names_last():
    names = ["main", "decay3", "step100", "stage2-step5", "ext5", "step10", "v1.0", "step2", "step0", "decay20"]
    assert sorted(names, key=revisions.training_order) == [
        "step0",
        "step2",
        "step10",
        "step100",
        "ext5",
        "stage2-step5",
        "decay3",
        "decay20",
        "main",
        "v1.0",
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 12])
def test_the_shards_of_a_list_are_the_list_once(n):
    items = [f"org/m@step{i}" for i in range(10)]
    parts = [revisions.shard(items, f"{k}/{n}") for k in range(1, n + 1)]
    assert sorted(m for part in parts for m in part) == sorted(items)
    assert sum(map(len, parts)) == len(items)
    assert all(max(map(len, parts)) - len(part) <= 1 for part in parts)
    assert revisions.shard(items, f"1/{n}") == items[::n]  # item i in shard i mod N + 1
    assert revisions.shard(items, f"1/{n}") == revisions.shard(items, f" 1/{n} ")


@pytest.mark.parametrize("spec", ["0/3", "4/3", "a/b", "3", "1/0", "-1/2", "1/2/3", "", "１/２", "1/２"])
def test_bad_shards_are_one_line_errors(spec):
    for parse in (revisions.parse_shard, lambda spec: revisions.shard(["a", "b"], spec)):
        with pytest.raises(ValueError, match="--shard must be K/N") as caught:
            parse(spec)
        assert "\n" not in str(caught.value)


# The stand-in hub: a series of tiny BERTs, each revision its own seed (so its own commit), served out of order.
SERIES = {"main": False, "step10": False, "step0": False, "step2": False, "decay3": True, "ext5": True, "step100": True}
IN_ORDER = ["step0", "step2", "step10", "step100", "ext5", "decay3", "main"]


@pytest.fixture(scope="module")
def series_folders(tmp_path_factory):
    from conftest import tiny

    root = tmp_path_factory.mktemp("series")
    folders = {}
    for seed, revision in enumerate(SERIES):
        folders[revision] = root / revision
        tiny("bert", seed=seed).save_pretrained(folders[revision])
    return folders


@pytest.fixture
def series(hub, series_folders):
    """``org/series`` on the stand-in hub; returns each revision's commit."""
    return {r: hub.add_folder("org/series", series_folders[r], revision=r, tag=SERIES[r]) for r in SERIES}


@pytest.mark.hub
def test_revisions_come_in_training_order_with_their_kind_commit_and_position(series):
    table = revisions.list_revisions("org/series")
    assert list(table.columns) == list(revisions.REVISION_COLUMNS)
    assert table["revision"].tolist() == IN_ORDER
    assert table["model"].tolist() == [f"org/series@{r}" for r in IN_ORDER]
    assert table["kind"].tolist() == ["tag" if SERIES[r] else "branch" for r in IN_ORDER]
    assert table["commit"].tolist() == [series[r] for r in IN_ORDER] and len(set(table["commit"])) == len(SERIES)
    assert table["step"].tolist()[:6] == [0, 2, 10, 100, 5, 3] and math.isnan(table["step"].iloc[6])
    assert table["phase"].tolist()[:6] == [0, 0, 0, 0, 1, 2]
    assert table["tokens"].isna().all()


@pytest.mark.hub
def test_match_keeps_the_revisions_whose_name_contains_the_pattern(series):
    assert revisions.list_revisions("org/series", match=r"^step\d$")["revision"].tolist() == ["step0", "step2"]
    assert revisions.list_revisions("org/series", match="e")["revision"].tolist() == [
        "step0",
        "step2",
        "step10",
        "step100",
        "ext5",
        "decay3",
    ]
    assert revisions.list_revisions("org/series", match="^nothing$").empty


@pytest.mark.hub
def test_a_repository_the_hub_does_not_have_is_not_found(hub):
    with pytest.raises(ExtractionError) as caught:
        revisions.list_revisions("org/absent")
    assert caught.value.kind == "not found" and "org/absent" in str(caught.value)


@pytest.mark.hub
def test_offline_the_revisions_cannot_be_listed(series, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ExtractionError) as caught:
        revisions.list_revisions("org/series")
    assert caught.value.kind == "offline" and "HF_HUB_OFFLINE" in str(caught.value)


@pytest.mark.hub
def test_an_unreachable_hub_is_a_one_line_offline_error(series, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(ExtractionError) as caught:
        revisions.list_revisions("org/series")
    assert caught.value.kind == "offline" and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "repo, match, message",
    [
        ("org/series@step0", None, "without a revision"),
        ("not a repo", None, "is not a hub model id"),
        ("org/series", "[", "is not a regular expression"),
    ],
)
def test_bad_input_to_list_revisions_is_refused_before_the_hub_is_asked(repo, match, message):
    with pytest.raises(ValueError, match=message) as caught:
        revisions.list_revisions(repo, match=match)
    assert "\n" not in str(caught.value)


@pytest.mark.hub
@pytest.mark.parametrize("name", ["step1\n/home/x/model", "step1\r", "../step1", "step 1", ".step1", "a//b"])
def test_a_ref_whose_name_is_not_a_revision_name_is_refused_when_it_would_be_listed(series, hub, series_folders, name):
    hub.add_folder("org/series", series_folders["step0"], revision=name)
    with pytest.raises(ExtractionError, match="not a revision name") as caught:
        revisions.list_revisions("org/series")
    assert repr(name) in str(caught.value) and "\n" not in str(caught.value)
    assert revisions.list_revisions("org/series", match="^step0$")["revision"].tolist() == ["step0"]


@pytest.mark.hub
def test_a_ref_pointing_to_something_that_is_not_a_commit_is_refused(series, hub):
    hub.misreport("org/series", sha="../../elsewhere")
    with pytest.raises(ExtractionError, match="'../../elsewhere' as a commit id"):
        revisions.list_revisions("org/series", match="^step0$")
