"""Transforms of one document's text applied before tokenising, by name.

:data:`PREPROCESSING` maps a name to a function ``str -> str`` of one document:

* ``"none"``: the document unchanged.
* ``"as-authors"``: the document's characters (Python code points), in order, joined by single spaces:
  ``"Hi you"`` becomes ``"H i   y o u"`` (the space between the words becomes three spaces), ``"a\\nb"`` becomes
  ``"a \\n b"``. The paper's authors' training script does this to every Wikipedia and RedPajama document before
  the bert-base-uncased tokenizer, and not to the Jigsaw comments (``docs/paper-notes.md``, "The authors'
  preprocessing"). BERT's pre-tokenizer splits on whitespace, so each non-whitespace character then becomes one
  token and the document's own spaces and line breaks leave no trace: the script's Wikipedia and RedPajama runs
  train on character sequences without word boundaries.

The variant exists so that the paper profile can train on the same text both ways and test whether the symmetry
and directionality findings for models trained from scratch depend on it. The function reproduces the authors'
text, not their token sequence: that is one token per non-whitespace character only under a tokenizer that drops
whitespace, as BERT's does; a byte-level BPE keeps the spaces (``"H i"`` pre-tokenises to ``H``, ``Ġi``). Truncation
to the model's length (the authors kept the first 512 tokens of each document) is not part of the transform.
"""

from __future__ import annotations

from collections.abc import Callable


def _identity(document: str) -> str:
    """The document, unchanged."""
    return document


def _characters_spaced(document: str) -> str:
    """The document's characters (code points) in order, with one space between each pair of neighbours."""
    return " ".join(document)


PREPROCESSING: dict[str, Callable[[str], str]] = {
    "none": _identity,
    "as-authors": _characters_spaced,
}


def preprocessing(name: str) -> Callable[[str], str]:
    """The transform :data:`PREPROCESSING` holds under ``name``; a ValueError naming the known ones otherwise."""
    if name not in PREPROCESSING:
        raise ValueError(f"unknown preprocessing {name!r}; known: {', '.join(PREPROCESSING)}")
    return PREPROCESSING[name]
