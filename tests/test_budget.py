"""The cost of a run: FLOPs per token against PyTorch's own count, a timed step, projections and their sentences."""

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attnstruct.tasks import step_cost, text_config
from attnstruct.training import budget
from attnstruct.training.model import LanguageModel
from attnstruct.training.model_config import TransformerConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def counted_flops(config: TransformerConfig, batch: int, length: int, selected: int) -> int:
    """FLOPs of one forward and backward pass of the model (head on ``selected`` positions), as PyTorch's
    FlopCounterMode counts its matrix products, plus ``Q K^T`` and ``A V`` done as explicit products (the counter
    does not see inside the CPU's fused attention)."""
    model = LanguageModel(config)
    ids = torch.randint(0, config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter:
        hidden = model.hidden(ids, False).flatten(0, 1)[:selected]
        model.head(hidden).sum().backward()
    shape = (batch, config.n_heads, length, config.d_head)
    q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
    with FlopCounterMode(display=False) as attention:
        ((q @ k.transpose(-1, -2)).softmax(-1) @ v).sum().backward()
    return counter.get_total_flops() + config.n_layers * attention.get_total_flops()


@pytest.mark.parametrize("selected_share", [1.0, 0.25])
def test_flops_per_token_is_the_count_of_every_matrix_product_forward_and_backward(selected_share):
    config = TransformerConfig(vocab_size=300, max_len=32, d_model=64, n_layers=2, n_heads=4, dropout=0.0)
    batch, length = 4, 32
    selected = int(batch * length * selected_share)
    formula = budget.flops_per_token(config, length, head_fraction=selected / (batch * length)) * batch * length
    assert formula == counted_flops(config, batch, length, selected)


def test_flops_per_token_refuses_a_share_of_positions_outside_zero_to_one():
    with pytest.raises(ValueError, match="head_fraction"):
        budget.flops_per_token(TransformerConfig(vocab_size=300), 64, head_fraction=1.5)


def test_the_peak_of_a_known_gpu_is_found_by_its_name_and_a_cpu_has_none():
    assert budget.peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert budget.peak_flops("NVIDIA H100 PCIe") == 756e12 and budget.peak_flops("NVIDIA H100 NVL") == 835e12
    assert budget.peak_flops("NVIDIA L40S") == 362e12 and budget.peak_flops("NVIDIA L4") == 121e12
    assert budget.peak_flops("cpu") is None and budget.peak_flops("Some Future Accelerator") is None
    assert budget.mfu(1e6, 1e6, 2e12) == 0.5 and budget.mfu(1e6, 1e6, None) is None


@pytest.mark.parametrize(
    "seconds, words",
    [(4.25, "4.2 s"), (42, "42 s"), (425, "7 min 05 s"), (3599.7, "1 h 00 min"), (5000, "1 h 23 min"), (3e5, "3.5 d")],
)
def test_a_duration_reads_in_the_largest_units_that_fit(seconds, words):
    assert budget.duration(seconds) == words


def test_runs_side_by_side_take_the_rounds_they_need():
    assert budget.project(0.5, 100, runs=5, parallel=2) == 3 * 100 * 0.5
    with pytest.raises(ValueError):
        budget.project(0.5, 100, runs=0)


def test_a_timed_step_leaves_the_global_random_state_as_it_was():
    config = text_config.TextConfig(d_model=16, n_layers=1, n_heads=2, seq_len=16, batch_size=4, accumulate=2)
    before = torch.random.get_rng_state()
    timing = step_cost.measure(config, "cpu", vocab_size=300, mask_id=3, steps=2, warmup=1)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert timing.seconds > 0 and timing.warmup_seconds > 0 and timing.tokens == 4 * 16 and timing.device == "cpu"


def test_the_cost_lines_count_tokens_passes_and_the_projected_time():
    configs = [text_config.TextConfig(objective=o, steps=1000, batch_size=8, seq_len=32) for o in ("mlm", "next-token")]
    timing = budget.StepTiming(seconds=0.5, tokens=8 * 32, warmup_seconds=1.0, device="cpu")
    lines = step_cost.describe_cost(configs, timing, vocab_size=500, train_tokens=64_000, parallel=1)
    mlm, decoder = (step_cost.flops_per_token(c, 500) for c in configs)
    expected = budget.duration(0.5 * 1000 * (1 + decoder / mlm))  # the decoder's head sees every position
    assert lines == [
        "each run: 1,000 steps x 8 sequences x 32 tokens = 256,000 tokens",
        "passes over the 64,000 training tokens: 4.00 per run",
        "one optimiser step timed on cpu: 0.5 s",
        "tokens per second: 512",
        f"training FLOPs per token: {mlm / 1e6:,.1f} million",
        "model-FLOPs utilisation: not known (no peak FLOP/s known for cpu)",
        f"projected: 2 runs, 1 side by side (2 after one another): {expected} at that step time",
    ]


def test_runs_side_by_side_are_projected_by_rounds_of_the_slowest():
    configs = [text_config.TextConfig(steps=100, batch_size=8, seq_len=32)] * 5
    timing = budget.StepTiming(seconds=2.0, tokens=8 * 32, warmup_seconds=1.0, device="cpu")
    lines = step_cost.describe_cost(configs, timing, vocab_size=500, parallel=2)
    expected = budget.duration(budget.project(2.0, 100, runs=5, parallel=2))
    assert lines[-1] == f"projected: 5 runs, 2 side by side (3 after one another): {expected} at that step time"
    with pytest.raises(ValueError, match="side by side"):
        step_cost.describe_cost(configs, timing, vocab_size=500, parallel=0)


def test_the_passes_of_a_corpus_not_prepared_yet_are_said_to_be_unknown():
    config = text_config.TextConfig()
    tokens = round(0.4 * 989e12 / step_cost.flops_per_token(config, 500))  # 40% of an H200's peak in one second
    timing = budget.StepTiming(seconds=1.0, tokens=tokens, warmup_seconds=1.0, device="NVIDIA H200")
    lines = step_cost.describe_cost([config], timing, vocab_size=500, parallel=4)
    assert lines[1] == "passes over the training tokens: not known until the corpus is prepared"
    assert lines[3] == f"tokens per second: {tokens:,}" and "," in lines[3]
    assert lines[5] == "model-FLOPs utilisation: 40%"
    assert lines[6].startswith("projected: 1 run, 1 side by side (1 after one another): ")


def test_the_random_corpus_stands_in_for_a_prepared_one():
    task = step_cost.RandomTokenTask(text_config.TextConfig(seq_len=16), vocab_size=50, mask_id=3)
    data = task.data
    assert data.train.shape == data.val.shape == (4 * 17,) and int(data.train.max()) < 50
    assert data.random_tokens == (0, 50) and data.mask_id == 3 and data.vocab_size == 50
    assert task.attrs()["corpus"] == "uniform random ids of a 50-token vocabulary"
    counts = torch.bincount(data.train, minlength=50).double() / len(data.train)
    entropy = -(counts[counts > 0] * counts[counts > 0].log()).sum()
    assert data.unigram_entropy() == pytest.approx(float(entropy)) and 0 < entropy <= math.log(50)
