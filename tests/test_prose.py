"""The formatters that render numbers as words: one style for every sentence the notebooks and analyses print."""

import pytest

from attnstruct.report import prose


def test_one_signed_number_format_for_every_sentence():
    assert prose.signed(-1e-9) == "+0.00"  # rounded first: never "-0.00"
    assert prose.signed(-0.126) == "-0.13"
    assert prose.signed(0.5, 1) == "+0.5"
    assert prose.signed(float("nan")) == "nan"


def test_numbers_spans_lists_and_counts():
    assert prose.number(6.0234) == "6.02" and prose.percent(0.259) == "26%" and prose.percent(float("nan")) == "never"
    assert prose.span([0.24, 0.14, float("nan")]) == "+0.14 to +0.24" and prose.span([0.1, 0.1]) == "+0.10"
    assert prose.span([]) == "none"
    assert prose.listing([0.21, 0.12, 0.13]) == "+0.21, +0.12 and +0.13" and prose.listing([0.2]) == "+0.20"
    assert prose.count(1, "seed") == "1 seed" and prose.count(3, "seed") == "3 seeds"
    assert prose.count(2, "family") == "2 families" and prose.count(2, "key") == "2 keys"
    assert prose.count(1, "family") == "1 family" and prose.count(2, "run", "runs so far") == "2 runs so far"


def test_bytes_in_the_largest_unit_they_fill():
    assert (
        prose.byte_size(369_700) == "369.7 kB"
        and prose.byte_size(2.5e9) == "2.5 GB"
        and prose.byte_size(512) == "512 B"
    )
    assert prose.span([30_800, 30_800], 1, prose.byte_size) == "30.8 kB"


def test_a_markdown_table_shows_every_cell_in_full():
    import pandas as pd

    frame = pd.DataFrame(
        {"text": ["a | b", "x" * 80], "p": [0.031249, float("nan")], "reachable": [True, False]},
        index=pd.Index(["first", "second"], name="claim"),
    )
    lines = prose.markdown_table(frame).splitlines()
    assert lines[0] == "| claim | text | p | reachable |" and lines[1] == "| --- | --- | --- | --- |"
    assert lines[2] == "| first | a \\| b | 0.0312 | yes |"
    assert lines[3] == f"| second | {'x' * 80} |  | no |" and len(lines) == 4


def test_fill_puts_a_records_fields_into_its_template():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Scored:
        checkpoints: str
        sizes: str

    filled = prose.fill("{checkpoints} scored{sizes}.", Scored("4 checkpoints", "; 1.0 M"))
    assert filled == "4 checkpoints scored; 1.0 M."


def test_fill_takes_a_mapping_as_well_as_a_record():
    assert prose.fill("**{series}:** {more} of {units}", {"series": "ettin", "more": 5, "units": "6 sizes"}) == (
        "**ettin:** 5 of 6 sizes"
    )


def test_a_template_field_the_record_lacks_is_a_key_error_naming_field_and_record():
    import dataclasses

    import pytest

    @dataclasses.dataclass(frozen=True)
    class PairFacts:
        series: str

    with pytest.raises(KeyError, match=r"'units', 'verdict'.*PairFacts") as raised:
        prose.fill("{series}: {units} {verdict} {units}", PairFacts("ettin"))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("a", "b", "said"),
    [(0.356, 0.344, "more symmetric than"), (0.1, 0.2, "less symmetric than"), (0.351, 0.349, "as symmetric as")],
)
def test_compared_says_more_or_less_only_of_numbers_that_differ_as_printed(a, b, said):
    assert prose.compared(a, b) == said


def test_compared_takes_its_own_words_and_digits():
    assert prose.compared(0.351, 0.349, "more", "less", "as symmetric", digits=3) == "more"
