"""Which data files make a dataset's config and split, decided as ``datasets`` decides it, and the error of a corpus
preparation's bad input.

:func:`select_files` reads the ``configs:`` of the dataset card's YAML header (``config_name``, ``data_files`` as a
pattern, a list, or ``split``/``path`` entries, ``default``), else the conventional layouts: shards
``[data/]{split}-NNNNN-of-NNNNN*``, a split's name as a folder or in a file name (``train``/``training``,
``validation``/``valid``/``dev``/``val``, ``test``/``testing``/``eval``), else every data file is ``train``; a
``--config`` without YAML configs names a top-level folder. Patterns follow fsspec's glob: ``*`` and ``?`` stay
within one path segment, ``**`` crosses them. A card is untrusted (a hub's file): its configs are kept as
:func:`checked_configs` reads them, names and patterns as text, at most :data:`MAX_PATTERNS` patterns and
:data:`MAX_CONFIG_CHARS` characters in all, however often the YAML's aliases repeat them. Bad input raises
:class:`CorpusError` with one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".txt")
SPLIT_KEYWORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
_SEP = r"[-._ 0-9]"
_SHARDED = re.compile(r"^(?:data/)?(?P<split>[^/]+?)-\d{5}-of-\d{5}[^/]*$")
MAX_PATTERNS = 100_000  # data file patterns of a card's configs, in all
MAX_CONFIG_CHARS = 8 << 20  # characters of a card's config names, split names and patterns, in all


class CorpusError(ValueError):
    """Bad input to a corpus preparation (a source, a config, a field, a tokenizer): one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def names_list(names, limit: int = 12) -> str:
    """``a, b, c`` (the first ``limit`` names, then ``... (N in all)``), or ``none``."""
    names = list(names)
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"


def glob_regex(pattern: str) -> re.Pattern:
    """The regex of an fsspec glob over ``/``-separated paths: ``**`` any run of characters, ``*`` and ``?`` within
    one segment, ``[...]`` a character class; ``**/`` also matches no folder at all."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            out += "[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]"
            i = end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    try:
        return re.compile(f"^{out}$")
    except re.error as err:  # a character class such as [z-a]
        raise CorpusError(f"{pattern!r} is not a glob pattern ({err})") from None


def is_data_file(name: str) -> bool:
    return name.lower().endswith(DATA_SUFFIXES) and not any(part.startswith(".") for part in name.split("/"))


def _data_files_of(entry) -> Iterator[tuple[object, object]]:
    """``(split, pattern)`` of each pattern of a YAML config's ``data_files`` (a pattern, a list of them,
    ``split``/``path`` entries, or a mapping), in order, as the YAML gives them (not yet checked to be text)."""
    if isinstance(entry, str):
        yield "train", entry
    elif isinstance(entry, dict):
        for split, found in entry.items():
            yield from ((split, pattern) for pattern in (found if isinstance(found, list) else [found]))
    elif isinstance(entry, list):
        for item in entry:
            if isinstance(item, str):
                yield "train", item
            elif isinstance(item, dict) and "path" in item:
                found = item["path"]
                split = item.get("split", "train")
                yield from ((split, pattern) for pattern in (found if isinstance(found, list) else [found]))


def _infer_splits(names: list[str]) -> dict[str, list[str]]:
    """``{split: files}`` of files laid out by convention (module docstring), relative to the config's folder."""
    sharded: dict[str, list[str]] = {}
    for name in names:
        if match := _SHARDED.match(name):
            sharded.setdefault(match["split"], []).append(name)
    if sharded:
        return sharded
    for in_folders in (True, False):
        found: dict[str, list[str]] = {}
        for split, words in SPLIT_KEYWORDS.items():
            word = re.compile(rf"^(?:.*{_SEP})?(?:{'|'.join(words)})(?:{_SEP}.*)?$")
            for name in names:
                parts = name.split("/")
                if any(word.match(part) for part in (parts[:-1] if in_folders else parts[-1:])):
                    found.setdefault(split, []).append(name)
        if found:
            return found
    return {"train": list(names)}


def select_files(
    names: list[str], configs: list[dict] | None, config: str | None, split: str | None, what: str
) -> tuple[str | None, str, list[str]]:
    """``(config, split, files)``: the data files among ``names`` (paths relative to the dataset's root) of the
    config and split asked for (``split`` None: ``train``), under the README's ``configs`` or the conventions."""
    data = sorted(n for n in names if is_data_file(n))
    split = split or "train"
    if configs:
        by_name = {str(c.get("config_name", "default")): c for c in configs}
        if config is None:
            chosen = [n for n, c in by_name.items() if c.get("default")] or [n for n in by_name if n == "default"]
            if not chosen and len(by_name) == 1:
                chosen = list(by_name)
            if not chosen:
                raise CorpusError(f"{what} has {len(by_name)} configs; choose one with --config: {names_list(by_name)}")
            config = chosen[0]
        if config not in by_name:
            raise CorpusError(f"config {config!r} is not in {what}; its configs: {names_list(by_name)}")
        splits: dict[str, set[str]] = {}
        for s, pattern in _data_files_of(by_name[config].get("data_files", "**")):
            regex = glob_regex(str(pattern).lstrip("/"))
            splits.setdefault(str(s), set()).update(n for n in data if regex.match(n))
        splits = {s: sorted(found) for s, found in splits.items()}
    else:
        base = ""
        if config not in (None, "default"):
            base = f"{config}/"
            folders = sorted({n.split("/")[0] for n in data if "/" in n})
            if not any(n.startswith(base) for n in data):
                raise CorpusError(
                    f"config {config!r} is not in {what}: its README declares no configs and no folder "
                    f"{config}/ holds data files; folders: {names_list(folders)}"
                )
        inner = _infer_splits([n[len(base) :] for n in data if n.startswith(base)])
        splits = {s: sorted(base + n for n in files) for s, files in inner.items()}
    if split not in splits:
        raise CorpusError(f"split {split!r} is not in {what}{_of(config)}; its splits: {names_list(sorted(splits))}")
    if not splits[split]:
        raise CorpusError(f"split {split!r} of {what}{_of(config)} matches no {', '.join(DATA_SUFFIXES)} file")
    return config, split, splits[split]


def _of(config: str | None) -> str:
    return f" (config {config})" if config else ""


def readme_configs(text: str, what: str = "README.md") -> list[dict] | None:
    """The ``configs`` of a dataset card's YAML header (:func:`checked_configs`), or None when it declares none.
    ``what`` names the card in errors."""
    import yaml

    if not text.startswith("---"):
        return None
    header = text[3:].split("\n---", 1)[0]
    try:
        card = yaml.safe_load(header)
    except (yaml.YAMLError, RecursionError):
        return None
    configs = card.get("configs") if isinstance(card, dict) else None
    return checked_configs(configs, what) if isinstance(configs, list) else None


def checked_configs(configs: list, what: str) -> list[dict]:
    """Each config (a mapping) of a card's ``configs`` as ``{"config_name": str, "default": bool, "data_files":
    {split: [patterns]}}`` (``data_files`` in any form ``datasets`` reads, :func:`_data_files_of`; ``**`` when
    none). CorpusError naming ``what`` for a pattern that is not text, or past :data:`MAX_PATTERNS` patterns or
    :data:`MAX_CONFIG_CHARS` characters in all (YAML aliases repeat a list without repeating its text)."""
    kept, patterns, chars = [], 0, 0
    for config in configs:
        if not isinstance(config, dict):
            continue
        name = _text(config.get("config_name", "default"), "a config name", what)
        splits: dict[str, list[str]] = {}
        for split, pattern in _data_files_of(config.get("data_files", "**")):
            split, pattern = _text(split, "a split name", what), _text(pattern, "a data file pattern", what)
            patterns, chars = patterns + 1, chars + len(split) + len(pattern)
            if patterns > MAX_PATTERNS or chars > MAX_CONFIG_CHARS:
                raise CorpusError(
                    f"{what} declares configs of more than {MAX_PATTERNS:,} data file patterns or "
                    f"{MAX_CONFIG_CHARS:,} characters"
                )
            splits.setdefault(split, []).append(pattern)
        kept.append({"config_name": name, "default": config.get("default") is True, "data_files": splits})
    return kept


def _text(value, role: str, what: str) -> str:
    """``value`` as text when it is a YAML scalar (a name may read as a number), else CorpusError."""
    if isinstance(value, (str, int, float)):
        return str(value)
    raise CorpusError(f"{what} gives a {type(value).__name__}, not text, as {role}")
