"""Notebook 04's parts (analyses.gradient_toy_runs), its learning criterion, effects and sentences
(analyses.gradient_toys), on tiny runs and made-up datasets with known answers."""

import math
from collections import Counter

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct import gradient as G
from attnstruct import results, stats
from attnstruct.analyses import gradient_toy_runs, gradient_toys
from attnstruct.tasks import toy_tasks

TINY = dict(seed=0, n_seeds=2, vocab=16, seq_len=8, d_model=8, steps=4, batch=4, lr=0.01, sgd_lr=0.05)
TINY |= dict(mask_rate=0.3, zipf=1.0, every=2, n_sequences=6, n_null=20)
PARAMETERISATIONS = ["W_qk", "W_q W_k^T"]


def made_up_training(symmetry, directionality, beta=None, loss=None, entropy=3.0, sgd_loss=(1.0, 1.0)):
    """A dataset shaped as ``training_runs``' output. ``symmetry``, ``directionality``, ``beta`` and ``loss`` map
    ``(task, objective)`` to per-seed values (the same for both parameterisations and both steps; ``loss`` the
    held-out loss, default 1 nat, far below ``entropy``)."""
    tasks, objectives = list(toy_tasks.TASKS), list(G.OBJECTIVES)
    n = len(next(iter(symmetry.values())))

    def grid(values, default):
        out = np.empty((2, 2, 2, n))
        for t, task in enumerate(tasks):
            for o, objective in enumerate(objectives):
                out[t, o, :, :] = (values or {}).get((task, objective), [default] * n)
        return out

    dims = ("task", "objective", "parameterisation", "seed", "step")
    recorded = {
        "symmetry": grid(symmetry, 0.0),
        "directionality": grid(directionality, 0.0),
        "beta_symmetry": grid(beta, 0.0),
        "loss": grid(loss, 1.0),
    }
    coords = {"task": tasks, "objective": objectives, "parameterisation": PARAMETERISATIONS, "seed": np.arange(n)}
    return xr.Dataset(
        {k: (dims, np.repeat(v[..., None], 2, axis=-1)) for k, v in recorded.items()}
        | {
            "held_out_loss": (dims[:-1], recorded["loss"]),
            "target_entropy": (("task", "objective"), np.full((2, 2), entropy)),
            "sgd_held_out_loss": ("objective", list(sgd_loss)),
        },
        coords=coords | {"step": [0, 10]},
    )


def ordered(n, treated=0.8, baseline=-0.2, jitter=0.05):
    """Per-seed symmetries with masked LM above next-token prediction in every seed (``n`` seeds)."""
    wiggle = jitter * np.sin(np.arange(n))
    return {("copy", "bidirectional"): treated + wiggle, ("copy", "causal"): baseline - wiggle}


# --- tasks.toy_tasks: the yardstick and the held-out batch -------------------------------------------------------


def test_target_entropy_is_the_entropy_of_the_predicted_tokens_counted_one_by_one():
    kw = dict(seq_len=8, vocab=16, zipf=1.0, mask_rate=0.3, n_sequences=300)
    for task in toy_tasks.TASKS:
        for objective in G.OBJECTIVES:
            fast = toy_tasks.target_entropy(task, objective, **kw, gen=torch.Generator().manual_seed(5))
            gen = torch.Generator().manual_seed(5)
            tokens = toy_tasks.sequences(task, 300, 8, 16, 1.0, gen)
            _, targets, predict, _ = toy_tasks.batch_for(objective, tokens, 16, 0.3, gen)
            counts = Counter(int(t) for t, p in zip(targets.ravel(), predict.ravel()) if p)
            total = sum(counts.values())
            brute = -sum(c / total * math.log(c / total) for c in counts.values())
            assert fast == pytest.approx(brute, abs=1e-12)


def test_target_entropy_of_uniform_tokens_is_log_vocab():
    entropy = toy_tasks.target_entropy(
        "copy", "causal", seq_len=8, vocab=8, zipf=0.0, mask_rate=0.3, n_sequences=20000, gen=torch.Generator()
    )
    assert entropy == pytest.approx(math.log(8), abs=0.005)


def test_the_held_out_batch_is_fresh_sequences_after_the_last_step():
    config = toy_tasks.CopyTaskConfig(objective="causal", vocab=16, seq_len=8, batch=5, steps=3, seed=2)
    ids, targets, predict, mask = toy_tasks.held_out_batch(config, "markov", n_sequences=12)
    assert ids.shape == targets.shape == predict.shape == (15, 8) and mask.shape == (8, 8)  # 3 batches of 5
    assert torch.equal(ids[:5], toy_tasks.training_batch(config, "markov", 4)[0]), "the first is step steps + 1"
    trained = torch.cat([toy_tasks.training_batch(config, "markov", s)[0] for s in range(4)])
    assert not any(torch.equal(row, seen) for row in ids for seen in trained)


def test_a_run_reports_a_reproducible_held_out_loss_that_runs_dataset_keeps():
    config = toy_tasks.CopyTaskConfig(vocab=16, seq_len=8, d_model=8, steps=4, batch=4, every=2, lr=0.01)
    first, again = toy_tasks.train(config, "copy"), toy_tasks.train(config, "copy")
    assert np.isfinite(first["held_out_loss"]) and first["held_out_loss"] == again["held_out_loss"]
    ds = toy_tasks.runs_dataset({("copy", "bidirectional", False, 0): first})
    assert float(ds.held_out_loss.squeeze()) == first["held_out_loss"]
    assert ds.held_out_loss.dims == ("task", "objective", "parameterisation", "seed")


# --- analyses.gradient_toy_runs: the parts ------------------------------------------------------------------------


def test_score_nulls_are_the_single_head_draws_of_the_package_null():
    nulls = gradient_toy_runs.score_nulls(8, 20, 3)
    for score in stats.SCORES:
        expected = stats.null_median_over_layers(score, 8, n_heads=1, n_layers=1, n_draws=20, seed=3)
        np.testing.assert_array_equal(nulls[f"null_{score}"].values, expected)
    assert list(nulls.null_draw.values) == list(range(20))


def test_the_null_of_the_difference_is_the_mean_of_differences_of_two_independent_pools():
    one_seed = gradient_toy_runs.null_of_the_difference("symmetry", 8, 50, 1, 0)
    pool = stats.null_median_over_layers("symmetry", 8, n_heads=1, n_layers=1, n_draws=50, seed=0)
    minus = stats.null_median_over_layers("symmetry", 8, n_heads=1, n_layers=1, n_draws=50, seed=1)
    possible = pool[:, None] - minus[None, :]
    assert np.isin(one_seed, possible).all(), "with one seed every sample is one difference of the two pools"
    four = gradient_toy_runs.null_of_the_difference("symmetry", 8, 50, 4, 0)
    assert four.std() == pytest.approx(possible.std() / 2, rel=0.15), "the mean of 4 is half as wide"


def test_the_analytic_gradient_check_agrees_with_autograd_for_both_objectives():
    errors = gradient_toy_runs.autograd_check(0)
    assert set(errors) == set(G.OBJECTIVES) and all(0 <= e < 1e-12 for e in errors.values())


def test_pair_roles_of_next_token_prediction_are_the_lower_triangle_without_the_last_row():
    roles = gradient_toy_runs.pair_roles(8, 16, 1.0, 0.15, 0, n_sequences=400)
    causal = roles.pair_probability.sel(objective="causal").values
    expected = np.tril(np.ones((8, 8)))
    expected[-1] = 0
    np.testing.assert_array_equal(causal, expected)
    np.testing.assert_allclose(roles.role_context.sel(objective="causal"), np.arange(7, -1, -1))
    assert list(roles.role_sequences.values) == [4, 400]
    for objective in G.OBJECTIVES:
        p = roles.pair_probability.sel(objective=objective).values
        assert float(roles.pair_asymmetry.sel(objective=objective)[-1]) == np.abs(p - p.T).max()
        np.testing.assert_allclose(roles.role_context.sel(objective=objective), p.sum(0))


def test_the_accumulated_updates_are_those_of_the_model_summed_directly():
    ds = gradient_toy_runs.accumulated_at_initialisation(TINY)
    assert list(ds.n_sequences.values) == [1, 4, 6]
    model = toy_tasks.OneLayer(16, 8, 8, factorised=False, gen=torch.Generator().manual_seed(0))
    data = toy_tasks.sequences("markov", 6, 8, 16, 1.0, torch.Generator().manual_seed(100))
    direct = toy_tasks.accumulated_updates(
        model, data, "causal", [1, 4, 6], mask_rate=0.3, gen=torch.Generator().manual_seed(200)
    )
    cell = ds.sel(task="markov", objective="causal")
    for name in gradient_toy_runs.ACCUMULATED:
        np.testing.assert_array_equal(cell[f"accumulated_{name}"].values, direct[name])
    np.testing.assert_array_equal(cell.accumulated_beta.values, direct["beta"])


@pytest.fixture(scope="module")
def tiny_training():
    return gradient_toy_runs.training_runs(TINY)


def test_training_runs_hold_every_run_as_train_gives_it(tiny_training):
    ds = tiny_training
    assert dict(ds.sizes) == {"task": 2, "objective": 2, "parameterisation": 2, "seed": 2, "step": 3}
    config = toy_tasks.CopyTaskConfig.from_params(TINY, objective="causal", factorised=True, seed=1, optimizer="adam")
    direct = toy_tasks.train(config, "markov")
    run = ds.sel(task="markov", objective="causal", parameterisation="W_q W_k^T", seed=1)
    np.testing.assert_array_equal(run.symmetry.values, direct["symmetry"])
    assert float(run.held_out_loss) == direct["held_out_loss"]
    sgd = toy_tasks.train(
        toy_tasks.CopyTaskConfig.from_params(
            TINY, objective="bidirectional", factorised=False, lr=0.05, optimizer="sgd"
        )
    )
    np.testing.assert_array_equal(ds.sgd_symmetry.sel(objective="bidirectional").values, sgd["symmetry"])
    assert float(ds.sgd_held_out_loss.sel(objective="bidirectional")) == sgd["held_out_loss"]


def test_the_yardstick_of_training_runs_is_the_target_entropy_of_its_task(tiny_training):
    expected = toy_tasks.target_entropy(
        "markov",
        "bidirectional",
        seq_len=8,
        vocab=16,
        zipf=1.0,
        mask_rate=0.3,
        n_sequences=gradient_toy_runs.YARDSTICK_SEQUENCES,
        gen=torch.Generator().manual_seed(400),
    )
    assert float(tiny_training.target_entropy.sel(task="markov", objective="bidirectional")) == expected


def test_the_dataset_joins_every_part_with_provenance(tiny_training):
    parts = [
        gradient_toy_runs.score_nulls(8, 20, 0),
        gradient_toy_runs.pair_roles(8, 16, 1.0, 0.3, 0, n_sequences=200),
        gradient_toy_runs.accumulated_at_initialisation(TINY),
        tiny_training,
    ]
    ds = gradient_toy_runs.dataset(TINY, parts)
    results.check_dataset(ds)
    before = {"loss", "symmetry", "directionality", "beta_symmetry", "sgd_symmetry", "sgd_directionality"}
    before |= {f"accumulated_{k}" for k in gradient_toy_runs.ACCUMULATED}
    before |= {"role_query", "role_context", "pair_probability", "null_symmetry", "null_directionality"}
    assert before <= set(ds.data_vars), "the variables the notebook's dataset has always held"
    for part in parts:
        for name, variable in part.data_vars.items():
            xr.testing.assert_equal(ds[name], variable)


# --- analyses.gradient_toys: learning -----------------------------------------------------------------------------


def test_a_run_has_learned_when_its_loss_is_the_margin_below_the_yardstick():
    margin = gradient_toys.LEARNING_MARGIN
    loss = {("copy", "causal"): [3.0 - margin, 3.0 - margin + 1e-9], ("markov", "bidirectional"): [np.nan, 0.5]}
    table = gradient_toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}, loss=loss))
    met = table["met"].xs("adam", level="optimizer").xs("W_qk", level="parameterisation")
    assert met.loc[("copy", "causal", 0)] and not met.loc[("copy", "causal", 1)], "exactly the margin meets it"
    assert not met.loc[("markov", "bidirectional", 0)], "a missing loss does not"
    assert met.loc[("markov", "bidirectional", 1)]
    assert table.loc[("copy", "causal", "W_qk", "adam", 0), "below"] == pytest.approx(margin)


def test_the_learning_table_lists_the_sgd_runs_after_the_adam_runs():
    table = gradient_toys.learning_table(made_up_training({("copy", "causal"): [0]}, {}, sgd_loss=(2.9, 1.0)))
    assert len(table) == 2 * 2 * 2 * 1 + 2
    sgd = table.xs("sgd", level="optimizer")
    assert list(sgd["met"]) == [False, True] and list(sgd.index.get_level_values("task")) == ["copy", "copy"]


def test_runs_learned_asks_every_selected_run():
    loss = {("markov", "causal"): [1.0, 2.9]}
    table = gradient_toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}, loss=loss))
    assert gradient_toys.runs_learned(table, task="copy")
    assert not gradient_toys.runs_learned(table, task="markov", parameterisation="W_qk")
    assert gradient_toys.runs_learned(table, task="markov", objective="bidirectional")
    with pytest.raises(ValueError, match="no run matches"):
        gradient_toys.runs_learned(table, task="reverse")


def test_describe_learning_counts_the_runs_and_names_those_that_missed():
    loss = {("markov", "causal"): [1.0, 2.75]}
    table = gradient_toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}, loss=loss))
    text = gradient_toys.describe_learning(table)
    assert "14 of 16 Adam runs meet it; 2 of 2 plain-SGD runs meet it." in text
    assert "markov, causal, W_qk, seed 1 (loss 2.75 against 3.00)" in text
    assert "markov, causal, W_q W_k^T, seed 1" in text and "seed 0" not in text
    everyone = gradient_toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}))
    assert "Not met" not in gradient_toys.describe_learning(everyone)


# --- analyses.gradient_toys: effects ------------------------------------------------------------------------------


def effects_of(training):
    return gradient_toys.objective_effects(training, d_model=8, n_null=50, seed=0)


def test_a_clear_order_over_eight_seeds_holds_and_the_reverse_does_not():
    effects = effects_of(made_up_training(ordered(8), {}))
    assert effects["copy", "W_qk", "symmetry"].verdict == stats.HOLDS
    assert effects["copy", "W_qk", "symmetry"].estimate == pytest.approx(1.0 + 0.1 * np.sin(np.arange(8)).mean())
    reverse = effects_of(made_up_training(ordered(8, treated=-0.2, baseline=0.8), {}))
    assert reverse["copy", "W_q W_k^T", "symmetry"].verdict == stats.DOES_NOT_HOLD


def test_directionality_is_predicted_more_column_dominant_under_next_token_prediction():
    directionality = {("markov", "bidirectional"): [0.9] * 8, ("markov", "causal"): [-0.9] * 8}
    effect = effects_of(made_up_training(ordered(8), directionality))["markov", "W_qk", "directionality"]
    assert effect.claim == "markov task, W_qk: final directionality, causal minus bidirectional"
    assert effect.estimate == pytest.approx(-1.8) and effect.verdict == stats.HOLDS


def test_two_seeds_cannot_reach_a_verdict_however_clear():
    effect = effects_of(made_up_training(ordered(2), {}))["copy", "W_qk", "symmetry"]
    assert effect.verdict == stats.CANNOT_TELL and "smallest attainable p is 0.25" in effect.reason


def test_effects_of_runs_that_did_not_learn_say_so():
    loss = {("copy", "causal"): [1.0] * 7 + [2.9]}
    effects = effects_of(made_up_training(ordered(8), {}, loss=loss))
    assert effects["copy", "W_qk", "symmetry"].reason == stats.NOT_LEARNED
    assert effects["copy", "W_qk", "symmetry"].verdict == stats.CANNOT_TELL
    assert effects["markov", "W_qk", "symmetry"].reason != stats.NOT_LEARNED, "the other task learned"


def test_the_proxy_effect_compares_each_runs_median_over_training():
    beta = {("copy", "bidirectional"): [0.6] * 8, ("copy", "causal"): [0.1] * 8}
    proxies = gradient_toys.proxy_effects(made_up_training(ordered(8), {}, beta=beta), seed=0)
    assert proxies["copy"].estimate == pytest.approx(0.5) and proxies["copy"].verdict == stats.HOLDS
    assert proxies["markov"].verdict == stats.CANNOT_TELL, "no difference at all"
    loss = {("copy", "bidirectional"): [2.9] + [1.0] * 7}
    gated = gradient_toys.proxy_effects(made_up_training(ordered(8), {}, beta=beta, loss=loss), seed=0)
    assert gated["copy"].reason == stats.NOT_LEARNED


# --- analyses.gradient_toys: sentences ----------------------------------------------------------------------------

POOL = np.arange(1000) / 1000  # 95% range: 0.025 to 0.975


def test_null_position_says_inside_above_or_below_with_the_percentile():
    assert gradient_toys.null_position(0.5, POOL) == "inside the null's 95% range, percentile 50"
    assert gradient_toys.null_position(2.0, POOL) == "above the null's 95% range, percentile 100"
    assert gradient_toys.null_position(-1.0, POOL) == "below the null's 95% range, percentile 0"


def test_null_positions_count_the_values_on_each_side():
    text = gradient_toys.null_positions([2.0, 3.0, -1.0, 0.5], POOL)
    assert text == "4 values: 2 above the null's 95% range, 1 below it, 1 inside it"
    assert gradient_toys.null_positions([0.5], POOL) == gradient_toys.null_position(0.5, POOL)


def test_describe_nulls_gives_the_central_range_of_each_score():
    nulls = xr.Dataset({"null_symmetry": ("null_draw", POOL), "null_directionality": ("null_draw", 2 * POOL - 1)})
    text = gradient_toys.describe_nulls(nulls, 8)
    assert text.startswith("The null: 1000 random single-head matrices")
    assert "symmetry +0.02 to +0.97, directionality -0.95 to +0.95" in text and "width 8" in text


def test_describe_autograd_check_prints_the_claim_lines():
    text = gradient_toys.describe_autograd_check({"bidirectional": 1e-15, "causal": 2e-12})
    assert text.splitlines() == [
        "bidirectional  analytic gradient equals autograd's (max relative difference < 1e-12): True",
        "causal         analytic gradient equals autograd's (max relative difference < 1e-12): False",
    ]


def made_up_roles(causal_asymmetry=(1.0, 1.0)):
    p = np.full((2, 4, 4), 0.25)
    p[1] = np.tril(np.ones((4, 4)))
    return xr.Dataset(
        {
            "pair_probability": (("objective", "position", "context_position"), p),
            "pair_asymmetry": (("objective", "role_sequences"), [[0.1, 0.01], list(causal_asymmetry)]),
        },
        coords={"objective": list(G.OBJECTIVES), "role_sequences": [10, 1000], "position": np.arange(4)},
    )


def test_describe_pair_asymmetry_prints_the_claim_lines():
    assert gradient_toys.describe_pair_asymmetry(made_up_roles()).splitlines() == [
        "P(i query, j context) from sampled sequences of length 4:",
        "bidirectional  largest entry 0.250;  max |P - P^T|: 0.100 from 10 sequences, 0.010 from 1000 sequences",
        "causal         largest entry 1.000;  max |P - P^T|: 1.000 from 10 sequences, 1.000 from 1000 sequences",
    ]


def test_describe_roles_gives_the_row_and_column_sums():
    text = gradient_toys.describe_roles(made_up_roles())
    assert "masked LM (bidirectional): as query 1.00 and as context 1.00 terms per sequence" in text
    assert "the largest difference between the two at one position is 3.00" in text  # causal: 1 and 4 at 0
    assert (
        "position 0 is context in 4.00 and query in 1.00, the last position context in 1.00 and query in 4.00" in text
    )


def test_describe_markov_task_states_the_fixed_matrix_and_shows_a_sequence_of_each_task():
    text = gradient_toys.describe_markov_task(16, 6, 1.0, 0)
    assert f"seed {toy_tasks.MARKOV_SEED}" in text and f"concentration {toy_tasks.MARKOV_CONCENTRATION}" in text
    copy_line = next(line for line in text.splitlines() if line.startswith("- copy task"))
    tokens = [int(t) for t in copy_line.split("`")[1].strip("[]").split(",")]
    assert len(tokens) == 6 and tokens[:3] == tokens[3:]


def test_describe_accumulated_reads_the_last_sum_with_and_without_the_self_pairs():
    values = np.zeros((2, 2, 2))
    values[0, 1, -1] = 0.9  # copy, causal, after all sequences
    dims = ("task", "objective", "n_sequences")
    ds = xr.Dataset(
        {
            "accumulated_symmetry": (dims, values),
            "accumulated_symmetry_without_self": (dims, values / 3),
            "accumulated_directionality": (dims, values - 0.5),
        },
        coords={"task": list(toy_tasks.TASKS), "objective": list(G.OBJECTIVES), "n_sequences": [1, 7]},
    )
    nulls = xr.Dataset({"null_symmetry": ("null_draw", POOL), "null_directionality": ("null_draw", POOL - 0.5)})
    text = gradient_toys.describe_accumulated(ds, nulls)
    assert text.startswith("The update summed over 7 sequences")
    assert (
        "- copy task, causal: symmetry +0.90 with the self-pairs (inside the null's 95% range, percentile 90) and "
        "+0.30 without them (inside the null's 95% range, percentile 30); directionality +0.40 (inside the null's "
        "95% range, percentile 90)."
    ) in text


def test_describe_final_scores_places_each_cell_and_marks_runs_that_did_not_learn():
    training = made_up_training({("copy", "bidirectional"): [2.0, 0.5]}, {}, loss={("markov", "causal"): [1, 2.9]})
    nulls = xr.Dataset({"null_symmetry": ("null_draw", POOL), "null_directionality": ("null_draw", POOL - 0.5)})
    text = gradient_toys.describe_final_scores(training, nulls, gradient_toys.learning_table(training))
    lines = text.splitlines()
    copy = next(line for line in lines if line.startswith("- copy task, bidirectional, W_qk:"))
    assert "symmetry +2.00 and +0.50 (2 values: 1 above the null's 95% range, 0 below it, 1 inside it)" in copy
    assert "did not" not in copy
    markov = next(line for line in lines if line.startswith("- markov task, causal, W_qk:"))
    assert markov.endswith("These runs did not all meet the learning criterion.")


def test_describe_orderings_reads_both_parameterisations_together_per_task():
    effects = effects_of(made_up_training(ordered(8), {}))
    text = gradient_toys.describe_orderings(made_up_training(ordered(8), {}), effects)
    lines = text.splitlines()
    assert lines[0].startswith("- copy task, mean final symmetry over 8 seeds (W_qk: masked LM +0.80")
    assert lines[0].endswith(f"both parameterisations read together: *{stats.HOLDS}*.")
    assert lines[1].endswith(f"*{stats.CANNOT_TELL}*."), "markov: no difference"
    assert text.endswith(f"over every task and parameterisation: *{stats.CANNOT_TELL}*.")


def test_describe_proxy_sets_the_proxy_effect_beside_the_wqk_effect():
    beta = {("copy", "bidirectional"): [0.6] * 8, ("copy", "causal"): [0.1] * 8}
    training = made_up_training(ordered(8), {}, beta=beta)
    proxies, effects = gradient_toys.proxy_effects(training, seed=0), effects_of(training)
    text = gradient_toys.describe_proxy(training, proxies, effects)
    assert "- copy task: the proxy's median over training and seeds (its range): masked LM +0.60 (+0.60)" in text
    assert proxies["copy"].sentence() in text and effects["copy", "W_qk", "symmetry"].sentence() in text
    copy, markov = text.split("- markov task")
    assert copy.rstrip().endswith(f"read together: *{stats.HOLDS}*.")
    assert markov.rstrip().endswith(f"read together: *{stats.CANNOT_TELL}*.")
