"""Checkpoint series: where in training a revision sits, a repository's revisions in training order, and a list cut
into shards.

Training checkpoints of one run live on the hub as branches or tags of one repository (Pythia's ``step143000``,
OLMo's ``step20000-tokens84B``, OLMo-2's ``stage1-step120000-tokens252B``, Ettin's ``step599525``, ``ext1000``,
``decay100``) or as repositories of their own (MultiBERTs' ``google/multiberts-seed_0-step_20k``).
:func:`parse_training_position` reads the position from such a name, :func:`model_position` from a sweep's model
line, :func:`list_revisions` lists a repository's branches and tags as sweep lines in training order, and
:func:`shard` cuts any list into ``N`` parts that together are the list.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd

from ..hub_client.client import get_json
from ..untrusted import UnsafeName, commit_id
from .extract.blocks import ExtractionError, hub_failures_as_extraction_errors
from .hub import HubSettings, parse_hub_id

REVISION_COLUMNS = ("model", "revision", "kind", "commit", "step", "tokens", "phase")
SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
_NUMBER = r"(?P<number>\d+(?:\.\d+)?)(?P<suffix>[kmbt]?)"
_STEP = re.compile(rf"step_?{_NUMBER}", re.IGNORECASE)
_TOKENS = re.compile(rf"tokens_?{_NUMBER}", re.IGNORECASE)
_LATER = re.compile(rf"(?P<phase>ext|decay)_?{_NUMBER}", re.IGNORECASE)
_STAGE = re.compile(r"stage(?P<stage>\d+)", re.IGNORECASE)
LATER_PHASES = {"ext": 1.0, "decay": 2.0}  # Ettin: pre-training, then context extension, then decay
_SHARD = re.compile(r"(?P<k>[0-9]{1,9})/(?P<n>[0-9]{1,9})")  # ASCII digits: \d and int() also read a full-width ２


class TrainingPosition(NamedTuple):
    """Where in training a checkpoint sits: ``step``, ``tokens`` seen and ``phase``, floats, NaN where unknown."""

    step: float
    tokens: float
    phase: float


def _number(match: re.Match) -> float:
    return float(match["number"]) * SUFFIXES[match["suffix"].lower()]


def parse_training_position(name: str) -> TrainingPosition:
    """The training position that a revision name, a folder name or a repository name holds.

    The name's last ``/`` component is cut at ``-`` into parts; each part that is one of these, in any case, counts
    (numbers may carry a suffix ``K``, ``M``, ``B`` or ``T``: thousand, million, billion, trillion):

    * ``stepN`` or ``step_N``: the step, in phase 0 (pre-training);
    * ``tokensN`` or ``tokens_N``: the tokens seen;
    * ``stageS``: phase ``S - 1`` (OLMo-2: ``stage1`` is pre-training, ``stage2`` the mid-training after it);
    * ``extN`` and ``decayN``: step ``N`` of phase 1 (context extension) and phase 2 (decay), Ettin's phases after
      pre-training, which keep their own step count;

    every other part (``ingredient1``, ``seed_0``, ``multiberts``) is ignored. A name without a step has NaN for
    step and phase; tokens are NaN when no part gives them. So a series sorts by ``(phase, step)``
    (:func:`training_order`). Examples:

    * ``step143000`` -> step 143000, phase 0 (Pythia);
    * ``step20000-tokens84B`` -> step 20000, tokens 84e9, phase 0 (OLMo);
    * ``stage1-step120000-tokens252B`` -> step 120000, tokens 252e9, phase 0 (OLMo-2);
    * ``stage2-ingredient1-step11931-tokens50B`` -> step 11931, tokens 50e9, phase 1 (OLMo-2);
    * ``ext1000`` -> step 1000, phase 1; ``decay100`` -> step 100, phase 2 (Ettin);
    * ``multiberts-seed_0-step_20k`` -> step 20000, phase 0 (MultiBERTs, a repository name);
    * ``runs/pythia/step1000`` -> step 1000, phase 0 (a local folder);
    * ``step1000-tokens1.5T`` -> tokens 1.5e12;
    * ``main``, ``v1.0`` -> NaN, NaN, NaN.
    """
    step = tokens = phase = math.nan
    for part in name.rstrip("/").rsplit("/", 1)[-1].split("-"):
        if (m := _STEP.fullmatch(part)) and math.isnan(step):
            step, phase = _number(m), 0.0 if math.isnan(phase) else phase
        elif (m := _LATER.fullmatch(part)) and math.isnan(step):
            step, phase = _number(m), LATER_PHASES[m["phase"].lower()]
        elif m := _TOKENS.fullmatch(part):
            tokens = _number(m)
        elif m := _STAGE.fullmatch(part):
            phase = float(int(m["stage"]) - 1)
    return TrainingPosition(step, tokens, math.nan if math.isnan(step) else phase)


def training_order(name: str, position: TrainingPosition | None = None) -> tuple:
    """Sort key: names with a step by ``(phase, step, name)``, then those without one by name."""
    position = position or parse_training_position(name)
    if math.isnan(position.step):
        return (1, 0.0, 0.0, name)
    return (0, position.phase, position.step, name)


def model_position(model: str) -> tuple[str, TrainingPosition]:
    """``(revision, position)`` of a sweep's model line.

    ``revision`` is what a hub id ``ORG/NAME@REV`` names after ``@`` (``""`` for a line without one: a bare hub id, a
    local path); ``position`` is :func:`parse_training_position` of that revision when it holds a step, else of the
    line's last path component without the revision. Examples:

    * ``EleutherAI/pythia-160m@step1000`` -> ``("step1000", step 1000)``;
    * ``google/multiberts-seed_0-step_20k`` -> ``("", step 20000)``;
    * ``/data/olmo/step20000-tokens84B`` -> ``("", step 20000, tokens 84e9)``;
    * ``gpt2`` -> ``("", NaN)``.
    """
    revision, base = "", model
    if "@" in model:
        try:
            _, named = parse_hub_id(model)
        except ValueError:
            named = ""
        if named:
            revision, base = named, model.rsplit("@", 1)[0]
    position = parse_training_position(revision) if revision else TrainingPosition(math.nan, math.nan, math.nan)
    return revision, position if not math.isnan(position.step) else parse_training_position(base)


def _pattern(match: str | None) -> re.Pattern | None:
    if match is None:
        return None
    try:
        return re.compile(match)
    except re.error as err:
        raise ValueError(f"--match {match!r} is not a regular expression ({err})") from None


def list_revisions(repo: str, *, match: str | None = None, settings: HubSettings | None = None) -> pd.DataFrame:
    """The branches and tags of hub repository ``repo`` (``ORG/NAME``; pull requests left out), one row each.

    Columns :data:`REVISION_COLUMNS`: ``model`` the sweep line ``ORG/NAME@REV``, ``revision`` the ref's name,
    ``kind`` ``branch`` or ``tag``, ``commit`` the commit it points to, and ``step``, ``tokens``, ``phase`` by
    :func:`parse_training_position`. ``match``: a regular expression the name must contain (``re.search``). Rows in
    :func:`training_order`: ``step0, step2, step10, step100, ext5, decay3, main``.

    Raises ``ValueError`` for a malformed id, an id with a revision or a bad ``match``, and
    :class:`~attnstruct.checkpoints.extract.ExtractionError` with its kind when the hub cannot say (offline, not
    found, gated, unreachable) or says what cannot be (:func:`_refs`); the endpoint and token come from
    :meth:`HubSettings.from_env`.
    """
    if "@" in repo:
        raise ValueError(f"{repo!r}: name the repository ORG/NAME without a revision; its revisions are listed")
    parse_hub_id(repo)
    pattern = _pattern(match)
    settings = settings or HubSettings.from_env()
    if settings.offline:
        raise ExtractionError(f"listing the revisions of {repo} needs the hub, and HF_HUB_OFFLINE is set", "offline")
    with hub_failures_as_extraction_errors():
        answer = get_json(f"{settings.endpoint}/api/models/{repo}/refs", token=settings.token, what=repo)
    rows = []
    for kind, ref in _refs(answer, repo):
        name = ref.get("name")
        if pattern is None or not isinstance(name, str) or pattern.search(name):
            name, commit = _checked(kind, ref, repo)
            position = parse_training_position(name)
            rows.append(
                {"model": f"{repo}@{name}", "revision": name, "kind": kind, "commit": commit} | position._asdict()
            )
    rows.sort(key=lambda row: training_order(row["revision"]))
    return pd.DataFrame(rows, columns=list(REVISION_COLUMNS))


def _refs(answer, repo: str) -> list[tuple[str, dict]]:
    """``(kind, ref)`` of each branch and tag of a refs answer (``GET /api/models/REPO/refs``: ``{"branches":
    [{"name", "targetCommit", ...}], "tags": [...]}``, as ``HfApi.list_repo_refs`` reads it)."""
    what = f"the hub's list of the refs of {repo}"
    if not isinstance(answer, dict):
        raise ExtractionError(f"{what} is not a JSON object")
    found = []
    for kind, key in (("branch", "branches"), ("tag", "tags")):
        refs = answer.get(key) or []
        if not isinstance(refs, list) or not all(isinstance(ref, dict) for ref in refs):
            raise ExtractionError(f"{what} gives its {key} as {type(refs).__name__}, not as a list of objects")
        found += [(kind, ref) for ref in refs]
    return found


def _checked(kind: str, ref: dict, repo: str) -> tuple[str, str]:
    """``(name, commit)`` of a ref to be listed, checked: the name must make a hub id that :func:`parse_hub_id`
    reads back as that revision (no newline, which would add a line of the hub's choosing to the list that a sweep
    reads, no ``..``, nothing a sweep could not score), the commit must be a commit id. ExtractionError otherwise."""
    what = f"the hub's list of the refs of {repo}"
    name = ref.get("name")
    try:
        readable = isinstance(name, str) and parse_hub_id(f"{repo}@{name}") == (repo, name)
    except ValueError:
        readable = False
    if not readable:
        raise ExtractionError(f"{what} names a {kind} {name!r}, which is not a revision name")
    try:
        return name, commit_id(ref.get("targetCommit"), f"{what} ({kind} {name})")
    except UnsafeName as err:
        raise ExtractionError(str(err)) from None


def parse_shard(spec: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)``, ``1 <= K <= N``, in ASCII digits; ``ValueError`` in one line otherwise (``0/3``,
    ``4/3``, ``a/b``, a full-width ``１/２``)."""
    m = _SHARD.fullmatch(str(spec).strip())
    if not m or not 1 <= int(m["k"]) <= int(m["n"]):
        raise ValueError(f"--shard must be K/N in ASCII digits with 1 <= K <= N (shard K of N), got {spec!r}")
    return int(m["k"]), int(m["n"])


def shard(items: Sequence, spec: str) -> list:
    """Shard ``K/N`` of ``items`` (:func:`parse_shard`): item ``i`` (0-based) goes to shard ``i mod N + 1``, so the
    ``N`` shards hold every item once and a series ordered by step is spread evenly over them.
    ``shard("abcde", "2/2") == ["b", "d"]``."""
    k, n = parse_shard(spec)
    return list(items)[k - 1 :: n]
