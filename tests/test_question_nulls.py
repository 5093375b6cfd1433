"""The null of each question: paired runs (labels exchangeable within a seed), "falls after its peak" (the early
minus the late window after the peak), and the pretrained population by family; each against brute force and on known
answers."""

import itertools

import numpy as np
import pandas as pd
import pytest

from attnstruct import stats


def test_the_paired_null_is_every_swap_of_labels_within_a_unit():
    rng = np.random.default_rng(1)
    treated, baseline = rng.normal(0.3, 1, 6), rng.normal(0, 1, 6)
    brute = []
    for swapped in itertools.product((False, True), repeat=6):
        s = np.array(swapped)
        t, b = np.where(s, baseline, treated), np.where(s, treated, baseline)
        brute.append(t.mean() - b.mean())
    null = stats.paired_null(treated - baseline)
    assert len(null) == 2**6 and np.allclose(np.sort(null), np.sort(brute))


def test_the_paired_null_by_monte_carlo_agrees_with_the_exact_one():
    d = np.random.default_rng(2).normal(0.2, 1, 10)
    exact, drawn = stats.paired_null(d), stats.paired_null(d, exact=False, n_samples=20_000, seed=3)
    assert len(drawn) == 20_000 and abs(drawn.mean()) < 0.02
    assert np.quantile(drawn, [0.025, 0.975]) == pytest.approx(np.quantile(exact, [0.025, 0.975]), abs=0.05)


def test_a_large_paired_difference_lies_beyond_its_null_and_none_does_not():
    rng = np.random.default_rng(4)
    large, none = rng.normal(1.0, 0.2, 8), rng.normal(0.0, 0.2, 8)
    assert stats.compare_with_null(large.mean(), stats.paired_null(large)).percentile > 99
    assert 2.5 < stats.compare_with_null(none.mean(), stats.paired_null(none)).percentile < 97.5


def _window_contrast(row, fraction) -> float:
    """Early-window mean minus late-window mean of the records after the peak of ``row``, by a loop."""
    peak = max(range(len(row)), key=lambda t: (row[t], -t))  # the first step of the highest value
    after = [row[t] for t in range(peak + 1, len(row))]
    if not after:
        return 0.0
    k = max(1, int(len(after) * fraction))
    early, late = after[:k], after[len(after) - k :]
    return sum(early) / k - sum(late) / k


def test_the_decay_contrast_is_the_early_minus_the_late_window_after_each_peak():
    x = np.random.default_rng(5).normal(size=(6, 11))
    x[1, -1] = 9.0  # the peak last: nothing after it
    x[2, -2] = 9.0  # one record after the peak: the two windows are that record
    for fraction in (1 / 3, 1 / 4, 1 / 2):
        brute = [_window_contrast(list(row), fraction) for row in x]
        assert list(stats.decay_contrast(x, fraction=fraction)) == pytest.approx(brute)
    assert list(stats.decay_contrast([[0, 3, 2, 1, 1, 1, 0, 1]])) == pytest.approx([1.5 - 0.5])


def test_one_late_bump_moves_the_decay_contrast_by_its_share_of_the_window_only():
    falls = np.concatenate([np.linspace(0, 1, 5), np.linspace(1, 0, 13)[1:]])
    bumped = falls.copy()
    bumped[-1] = 0.5  # a last record well above the ones before it
    clean, with_bump = stats.decay_contrast([falls, bumped])
    assert with_bump > 0 and clean - with_bump == pytest.approx(0.5 / 4)


def test_a_fall_that_levels_off_holds_by_sign_flip_and_a_rise_that_stays_does_not():
    steps = np.linspace(0, 1, 25)
    rng = np.random.default_rng(7)
    shape = np.where(steps < 0.1, 6 * steps, 0.6 * np.exp(-8 * (steps - 0.1)) + 0.12)
    falls = shape + rng.normal(0, 0.005, (5, 25))
    stays = np.minimum(steps, 0.3) + rng.normal(0, 0.005, (5, 25))
    for trajectories, verdict in ((falls, stats.HOLDS), (stays, stats.CANNOT_TELL)):
        contrast = stats.decay_contrast(trajectories)
        effect = stats.paired_effect(contrast, np.zeros_like(contrast), claim="falls")
        assert effect.verdict == verdict, effect
    assert (stats.peak_minus_final(stays) >= 0).all()


def test_the_trajectory_nulls_refuse_a_trajectory_of_one_step():
    with pytest.raises(ValueError, match="trajectories"):
        stats.peak_minus_final([[1.0]])
    with pytest.raises(ValueError, match="trajectories"):
        stats.decay_contrast([1.0, 2.0])
    with pytest.raises(ValueError, match="trajectories"):
        stats.decay_contrast([[np.nan, 1.0]])
    with pytest.raises(ValueError, match="fraction"):
        stats.decay_contrast([[1.0, 2.0]], fraction=0.6)


@pytest.mark.parametrize(
    ("model_id", "model_type", "family"),
    [
        ("facebook/musicgen-stereo-small", None, "musicgen"),
        ("openai/whisper-tiny", None, "whisper"),
        ("microsoft/speecht5_tts", None, "speecht5"),
        ("bert-base-uncased", None, "bert"),
        ("Qwen/Qwen2.5-0.5B", None, "qwen2.5"),
        ("cross-encoder/ms-marco-MiniLM-L-6-v2", "bert", "bert"),
        ("HuggingFaceTB/SmolLM2-135M", "llama", "llama"),
        ("google/t5-small", "T5", "t5"),
        ("x/roberta-large", "xlm-roberta", "xlmroberta"),
        ("openai/whisper-base", float("nan"), "whisper"),
        ("meta-llama/Meta-Llama-3-8B", None, "llama"),
        ("openai-community/openai-gpt", None, "gpt"),
        ("x/meta", None, "meta"),
    ],
)
def test_the_family_of_a_model(model_id, model_type, family):
    assert stats.model_family(model_id, model_type) == family


def _population():
    rows = [("enc-a", "encoder", 0.50 + 0.001 * i) for i in range(10)]  # ten fine-tunes of one encoder
    rows += [("enc-b", "encoder", 0.40), ("enc-c", "encoder", 0.45), ("enc-d", "encoder", 0.42)]
    rows += [("dec-a", "decoder", 0.10), ("dec-a", "decoder", 0.12), ("dec-b", "decoder", 0.05)]
    rows += [("dec-c", "decoder", 0.08), ("dec-d", "decoder", np.nan)]
    return pd.DataFrame(rows, columns=["family", "role", "symmetry"])


def test_family_values_are_medians_per_family_and_role():
    table = stats.family_values(_population(), "symmetry")
    assert len(table) == 7  # dec-d has no value
    row = table.set_index(["family", "role"]).loc[("enc-a", "encoder")]
    assert row["value"] == pytest.approx(np.median(0.50 + 0.001 * np.arange(10))) and row["n_models"] == 10
    with pytest.raises(KeyError, match="no column"):
        stats.family_values(_population(), "directionality")


def test_the_family_effect_counts_families_not_checkpoints():
    population = _population()
    effect = stats.family_effect(population, "symmetry", treated="encoder", control="decoder", claim="enc minus dec")
    table = stats.family_values(population, "symmetry")
    encoders, decoders = (table.loc[table.role == role, "value"] for role in ("encoder", "decoder"))
    expected = stats.two_sample_effect(encoders, decoders, claim="x", unit="family")
    assert effect.unit == "family" and effect.n == 4 and effect.p_value == expected.p_value
    assert effect.smallest == pytest.approx(1 / 35) and effect.verdict == stats.HOLDS
    flipped = population.assign(role=population.role.map({"encoder": "decoder", "decoder": "encoder"}))
    reversed_effect = stats.family_effect(flipped, "symmetry", treated="encoder", control="decoder", claim="x")
    assert reversed_effect.verdict != stats.HOLDS
    with pytest.raises(ValueError, match="no family of role"):
        stats.family_effect(population, "symmetry", treated="encoder", control="vision", claim="x")


def test_no_effect_stays_inside_the_family_null():
    rng = np.random.default_rng(9)
    same = pd.DataFrame({"family": [f"f{i}" for i in range(12)], "role": ["encoder", "decoder"] * 6})
    same["symmetry"] = rng.normal(0.3, 0.1, 12)
    effect = stats.family_effect(same, "symmetry", treated="encoder", control="decoder", claim="x")
    assert effect.n == 6 and effect.verdict == stats.CANNOT_TELL


def test_a_design_of_two_families_cannot_reach_a_verdict_and_says_so_in_families():
    two = pd.DataFrame({"family": ["a", "b", "c", "d"], "role": ["encoder"] * 2 + ["decoder"] * 2})
    effect = stats.family_effect(
        two.assign(symmetry=[0.5, 0.6, 0.1, 0.0]), "symmetry", treated="encoder", control="decoder", claim="x"
    )
    assert effect.verdict == stats.CANNOT_TELL and "with 2 families the smallest attainable p is 0.167" in effect.reason
    assert effect.n == 2 and effect.unit == "family"


@pytest.mark.parametrize("n_layers", [1, 3])
def test_a_directionality_null_over_layers_holds_each_draw_and_its_transpose(n_layers):
    null = stats.null_median_over_layers("directionality", 16, 2, n_layers, n_draws=30, seed=4)
    drawn = null[: len(null) // 2]
    assert len(null) == 60 and np.array_equal(null[30:], -drawn) and np.median(null) == 0.0


def test_the_resampled_directionality_null_is_centred_at_zero_exactly():
    null = stats.median_null("directionality", 16, 2, 6, n_draws=40, layer_draws=30, seed=5)
    assert np.array_equal(np.sort(null), np.sort(-null)) and np.median(null) == 0.0


def test_a_symmetry_null_is_not_mirrored():
    null = stats.null_median_over_layers("symmetry", 16, 2, 3, n_draws=30, seed=4)
    assert len(null) == 30 and np.median(null) > 0


def test_the_symmetrised_null_of_a_mean_has_mirrored_quantiles():
    pool = stats.null_median_over_layers("directionality", 16, 2, 3, n_draws=30, seed=4)
    null = stats.symmetrised(stats.null_of_the_mean(pool, 5, seed=2))
    low, high = np.quantile(null, [0.025, 0.975])
    assert np.median(null) == 0.0 and low == pytest.approx(-high, abs=1e-15)
