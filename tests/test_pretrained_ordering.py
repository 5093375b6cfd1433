"""The claims notebooks 03 and 08 share and 08's sweep: encoders against decoders counted by model family."""

import pandas as pd

from attnstruct import stats
from attnstruct.analyses import pretrained_ordering


def test_the_sweep_counts_families_by_model_type_and_decides_under_its_plan():
    rows = [
        ("bert-a", "encoder", 0.50),
        ("bert-b", "encoder", 0.55),
        ("roberta", "encoder", 0.45),
        ("gpt2", "decoder", 0.05),
        ("llama-a", "decoder", 0.10),
        ("llama-b", "decoder", 0.12),
        ("t5", "encoder", 0.40),
        ("t5", "decoder", 0.08),
        ("t5", "cross", 0.90),
    ]
    summary = pd.DataFrame(rows, columns=["model", "stack", "symmetry_median"]).assign(directionality_median=0.0)
    types = {"bert-a": "bert", "bert-b": "bert", "roberta": "roberta", "gpt2": "gpt2", "t5": "t5"}
    table = pretrained_ordering.sweep_rows(summary, types)
    assert "cross" not in set(table["stack"]) and list(table.model_family) == [
        "bert",
        "bert",
        "roberta",
        "gpt2",
        "llama",
        "llama",
        "t5",
        "t5",
    ]
    decided = pretrained_ordering.sweep_effects(summary, types)
    assert [e.claim for e in decided] == [c.name for c in pretrained_ordering.SWEEP_PLAN.claims]
    assert decided[0].unit == "family" and decided[0].n == 3 and decided[2].unit == "stack" and decided[2].n == 4
    reach = pretrained_ordering.sweep_smallest(summary, types)
    assert reach[decided[0].claim] == stats.smallest_two_sample_p(3, 3) == decided[0].smallest
    assert reach[pretrained_ordering.STACK_CLAIM] == stats.smallest_two_sample_p(4, 4)
    assert pretrained_ordering.sweep_effects(summary[summary["stack"] == "encoder"], types) == []
