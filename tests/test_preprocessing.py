"""attnstruct.tasks.preprocessing: the identity, the character-spaced variant, and the refusal of unknown names."""

import pytest

from attnstruct.tasks import preprocessing as prep

EXAMPLES = ["", "a", "Hello world.", "two  spaces", "line one\nline two\n", "Café Zürich — naïve", "東京", "e\u0301"]


def test_the_names_are_none_and_as_authors():
    assert list(prep.PREPROCESSING) == ["none", "as-authors"]
    assert all(prep.preprocessing(name) is fn for name, fn in prep.PREPROCESSING.items())


@pytest.mark.parametrize("text", EXAMPLES)
def test_none_returns_the_document_unchanged(text):
    assert prep.preprocessing("none")(text) == text


@pytest.mark.parametrize(
    "text, spaced",
    [
        ("", ""),
        ("a", "a"),
        ("Hi you", "H i   y o u"),
        ("two  spaces", "t w o     s p a c e s"),
        ("a\nb", "a \n b"),
        ("line\n\nnext", "l i n e \n \n n e x t"),
        ("Café — ü", "C a f é   —   ü"),
        ("東京", "東 京"),
        ("e\u0301", "e \u0301"),
    ],
)
def test_as_authors_puts_one_space_between_neighbouring_characters(text, spaced):
    assert prep.preprocessing("as-authors")(text) == spaced


@pytest.mark.parametrize("text", EXAMPLES)
def test_as_authors_keeps_every_character_at_the_even_positions(text):
    """Characters sit at positions 0, 2, 4, ... and every odd position is one space: 2n - 1 characters for n > 0."""
    out = prep.preprocessing("as-authors")(text)
    assert out[::2] == text
    assert set(out[1::2]) <= {" "} and len(out) == max(2 * len(text) - 1, 0)


def test_as_authors_erases_word_boundaries_for_a_whitespace_splitting_tokenizer():
    """Splitting the spaced text on whitespace gives the same characters with and without the original spaces."""
    spaced = prep.preprocessing("as-authors")
    assert spaced("hello world").split() == spaced("helloworld").split() == list("helloworld")


def test_unknown_names_are_refused_in_one_line_listing_the_known_ones():
    with pytest.raises(ValueError) as info:
        prep.preprocessing("characters")
    message = str(info.value)
    assert "\n" not in message
    assert message == "unknown preprocessing 'characters'; known: none, as-authors"
