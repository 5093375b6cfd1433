"""Notebook 04's analysis (analyses.nb04_gradient_structure): its parts, learning criterion, effects and the facts
its sentences and titles state, on tiny runs and made-up datasets with known answers."""

import math
from collections import Counter

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct import gradient as G
from attnstruct import results, stats
from attnstruct.analyses import nb04_gradient_structure as toys
from attnstruct.report import prose
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


# --- the parts ------------------------------------------------------------------------


def test_single_head_nulls_are_the_single_head_draws_of_the_package_null():
    nulls = toys.single_head_nulls(8, 20, 3)
    for score in stats.SCORES:
        expected = stats.null_median_over_layers(score, 8, n_heads=1, n_layers=1, n_draws=20, seed=3)
        np.testing.assert_array_equal(nulls[f"null_{score}"].values, expected)
    assert list(nulls.null_draw.values) == list(range(20)) and nulls.sizes["null_draw_or_transpose"] == 40


def test_the_null_of_a_directionality_difference_is_centred_at_zero_exactly():
    null = toys.null_of_the_difference("directionality", 8, 50, 4, 0)
    assert np.median(null) == 0.0 and np.array_equal(np.sort(null), np.sort(-null))


def test_the_null_of_the_difference_is_the_mean_of_differences_of_two_independent_pools():
    one_seed = toys.null_of_the_difference("symmetry", 8, 50, 1, 0)
    pool = stats.null_median_over_layers("symmetry", 8, n_heads=1, n_layers=1, n_draws=50, seed=0)
    minus = stats.null_median_over_layers("symmetry", 8, n_heads=1, n_layers=1, n_draws=50, seed=1)
    possible = pool[:, None] - minus[None, :]
    assert np.isin(one_seed, possible).all(), "with one seed every sample is one difference of the two pools"
    four = toys.null_of_the_difference("symmetry", 8, 50, 4, 0)
    assert four.std() == pytest.approx(possible.std() / 2, rel=0.15), "the mean of 4 is half as wide"


def test_the_analytic_gradient_check_agrees_with_autograd_for_both_objectives():
    errors = toys.autograd_check(0)
    assert set(errors) == set(G.OBJECTIVES) and all(0 <= e < 1e-12 for e in errors.values())


def test_pair_roles_of_next_token_prediction_are_the_lower_triangle_without_the_last_row():
    roles = toys.pair_roles(8, 16, 1.0, 0.15, 0, n_sequences=400)
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
    ds = toys.accumulated_at_initialisation(TINY)
    assert list(ds.n_sequences.values) == [1, 4, 6]
    model = toy_tasks.OneLayer(16, 8, 8, factorised=False, gen=torch.Generator().manual_seed(0))
    data = toy_tasks.sequences("markov", 6, 8, 16, 1.0, torch.Generator().manual_seed(100))
    direct = toy_tasks.accumulated_updates(
        model, data, "causal", [1, 4, 6], mask_rate=0.3, gen=torch.Generator().manual_seed(200)
    )
    cell = ds.sel(task="markov", objective="causal")
    for name in toys.ACCUMULATED:
        np.testing.assert_array_equal(cell[f"accumulated_{name}"].values, direct[name])
    np.testing.assert_array_equal(cell.accumulated_beta.values, direct["beta"])


@pytest.fixture(scope="module")
def tiny_training():
    return toys.training_runs(TINY)


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
        n_sequences=toys.YARDSTICK_SEQUENCES,
        gen=torch.Generator().manual_seed(400),
    )
    assert float(tiny_training.target_entropy.sel(task="markov", objective="bidirectional")) == expected


def test_the_dataset_joins_every_part_with_provenance(tiny_training):
    parts = [
        toys.single_head_nulls(8, 20, 0),
        toys.pair_roles(8, 16, 1.0, 0.3, 0, n_sequences=200),
        toys.accumulated_at_initialisation(TINY),
        tiny_training,
    ]
    ds = toys.result_dataset(TINY, parts)
    results.check_dataset(ds)
    before = {"loss", "symmetry", "directionality", "beta_symmetry", "sgd_symmetry", "sgd_directionality"}
    before |= {f"accumulated_{k}" for k in toys.ACCUMULATED}
    before |= {"role_query", "role_context", "pair_probability", "null_symmetry", "null_directionality"}
    assert before <= set(ds.data_vars), "the variables the notebook's dataset has always held"
    for part in parts:
        for name, variable in part.data_vars.items():
            xr.testing.assert_equal(ds[name], variable)


# --- learning -----------------------------------------------------------------------------


def test_a_run_has_learned_when_its_loss_is_the_margin_below_the_yardstick():
    margin = toys.LEARNING_MARGIN
    loss = {("copy", "causal"): [3.0 - margin, 3.0 - margin + 1e-9], ("markov", "bidirectional"): [np.nan, 0.5]}
    table = toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}, loss=loss))
    met = table["met"].xs("adam", level="optimizer").xs("W_qk", level="parameterisation")
    assert met.loc[("copy", "causal", 0)] and not met.loc[("copy", "causal", 1)], "exactly the margin meets it"
    assert not met.loc[("markov", "bidirectional", 0)], "a missing loss does not"
    assert met.loc[("markov", "bidirectional", 1)]
    assert table.loc[("copy", "causal", "W_qk", "adam", 0), "below"] == pytest.approx(margin)


def test_the_learning_table_lists_the_sgd_runs_after_the_adam_runs():
    table = toys.learning_table(made_up_training({("copy", "causal"): [0]}, {}, sgd_loss=(2.9, 1.0)))
    assert len(table) == 2 * 2 * 2 * 1 + 2
    sgd = table.xs("sgd", level="optimizer")
    assert list(sgd["met"]) == [False, True] and list(sgd.index.get_level_values("task")) == ["copy", "copy"]


def test_runs_learned_asks_every_selected_run():
    loss = {("markov", "causal"): [1.0, 2.9]}
    table = toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}, loss=loss))
    assert toys.runs_learned(table, task="copy")
    assert not toys.runs_learned(table, task="markov", parameterisation="W_qk")
    assert toys.runs_learned(table, task="markov", objective="bidirectional")
    with pytest.raises(ValueError, match="no run matches"):
        toys.runs_learned(table, task="reverse")


def test_the_learning_summary_counts_the_runs_and_names_those_that_missed():
    loss = {("markov", "causal"): [1.0, 2.75]}
    learned = toys.learning_summary(toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}, loss=loss)))
    assert (learned.adam_met, learned.adam_runs, learned.sgd_met, learned.sgd_runs) == (
        "14",
        "16 Adam runs",
        "2",
        "2 plain-SGD runs",
    )
    assert learned.has_sgd and not learned.all_met
    assert "markov, causal, W_qk, seed 1 (loss 2.75 against 3.00)" in learned.misses.split("; ")
    assert "seed 0" not in learned.misses
    everyone = toys.learning_table(made_up_training({("copy", "causal"): [0, 0]}, {}))
    assert toys.learning_summary(everyone).all_met


# --- effects ------------------------------------------------------------------------------


def effects_of(training):
    return toys.objective_effects(training, d_model=8, n_null=50, seed=0)


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
    proxies = toys.proxy_effects(made_up_training(ordered(8), {}, beta=beta), seed=0)
    assert proxies["copy"].estimate == pytest.approx(0.5) and proxies["copy"].verdict == stats.HOLDS
    assert proxies["markov"].verdict == stats.CANNOT_TELL, "no difference at all"
    loss = {("copy", "bidirectional"): [2.9] + [1.0] * 7}
    gated = toys.proxy_effects(made_up_training(ordered(8), {}, beta=beta, loss=loss), seed=0)
    assert gated["copy"].reason == stats.NOT_LEARNED


# --- facts ----------------------------------------------------------------------------

POOL = np.arange(1000) / 1000  # 95% range: 0.025 to 0.975


def test_null_side_says_inside_above_or_below_with_the_percentile():
    assert toys.null_side(0.5, POOL) == ("inside", "50")
    assert toys.null_side(2.0, POOL) == ("above", "100")
    assert toys.null_side(-1.0, POOL) == ("below", "0")


def test_null_sides_count_the_values_on_each_side():
    assert toys.null_sides([2.0, 3.0, -1.0, 0.5], POOL) == ("2", "1", "1")
    assert toys.null_sides([0.5], POOL) == ("0", "0", "1")
    with pytest.raises(ValueError, match="must not be empty"):
        toys.null_sides([], POOL)


def test_the_null_ranges_are_the_central_95_percent_of_each_score():
    nulls = xr.Dataset({"null_symmetry": ("null_draw", POOL), "null_directionality": ("null_draw", 2 * POOL - 1)})
    assert toys.null_ranges(nulls, 8) == toys.NullFacts(
        "1000 random single-head matrices", "8", "+0.02 to +0.97", "-0.95 to +0.95"
    )


def test_the_autograd_agreement_reads_each_error_against_the_tolerance():
    facts = toys.autograd_agreement({"bidirectional": 1e-15, "causal": 2e-12})
    assert [(f.objective, f.tolerance, f.equal) for f in facts] == [
        ("bidirectional", "1e-12", True),
        ("causal", "1e-12", False),
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


def test_the_pair_asymmetry_gives_the_largest_entry_and_each_estimate():
    bidirectional, causal = toys.pair_asymmetry(made_up_roles())
    assert (bidirectional.length, bidirectional.largest, causal.largest) == ("4", "0.250", "1.000")
    assert bidirectional.estimates == "0.100 from 10 sequences, 0.010 from 1000 sequences"


def test_the_role_counts_are_the_row_and_column_sums():
    bidirectional, causal = toys.role_counts(made_up_roles())
    assert (bidirectional.name, bidirectional.query, bidirectional.context) == ("masked LM", "1.00", "1.00")
    assert causal.largest_difference == "3.00"  # causal: 1 and 4 at position 0
    assert (causal.first_context, causal.first_query, causal.last_context, causal.last_query) == (
        "4.00",
        "1.00",
        "1.00",
        "4.00",
    )


def test_the_markov_facts_state_the_fixed_matrix_and_an_example_of_each_task():
    markov = toys.markov_task(16)
    assert (markov.seed, markov.concentration) == (str(toy_tasks.MARKOV_SEED), str(toy_tasks.MARKOV_CONCENTRATION))
    copy = next(e for e in toys.example_sequences(16, 6, 1.0, 0) if e.task == "copy")
    tokens = [int(t) for t in copy.tokens.strip("[]").split(",")]
    assert len(tokens) == 6 and tokens[:3] == tokens[3:]


def test_the_accumulated_facts_read_the_last_sum_with_and_without_the_self_pairs():
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
    cell = next(c for c in toys.accumulated_against_null(ds, nulls) if (c.task, c.objective) == ("copy", "causal"))
    assert (cell.with_self, cell.without_self, cell.directionality) == ("+0.90", "+0.30", "+0.40")
    assert (cell.with_self_side, cell.with_self_percentile) == ("inside", "90")
    assert (cell.without_self_side, cell.without_self_percentile) == ("inside", "30")


def test_the_final_scores_place_each_cell_and_mark_runs_that_did_not_learn():
    training = made_up_training({("copy", "bidirectional"): [2.0, 0.5]}, {}, loss={("markov", "causal"): [1, 2.9]})
    nulls = xr.Dataset({"null_symmetry": ("null_draw", POOL), "null_directionality": ("null_draw", POOL - 0.5)})
    facts = {
        (f.task, f.objective, f.parameterisation): f
        for f in toys.final_scores(training, nulls, toys.learning_table(training))
    }
    copy = facts["copy", "bidirectional", "W_qk"]
    assert copy.symmetry == "+2.00 and +0.50" and copy.learned
    assert (copy.seeds, copy.symmetry_above, copy.symmetry_below, copy.symmetry_inside) == ("2 seeds", "1", "0", "1")
    assert not facts["markov", "causal", "W_qk"].learned


def test_the_orderings_read_both_parameterisations_together_per_task():
    effects = effects_of(made_up_training(ordered(8), {}))
    copy, markov = toys.orderings(made_up_training(ordered(8), {}), effects)
    assert copy.seeds == "8 seeds" and copy.means.startswith("W_qk: masked LM +0.80")
    assert (copy.verdict, markov.verdict) == (stats.HOLDS, stats.CANNOT_TELL)  # markov: no difference
    assert toys.primary_summary(effects).verdict == stats.HOLDS  # the summary is the primary claim's (copy, W_qk)


def test_the_proxy_readings_set_the_proxy_effect_beside_the_wqk_effect():
    beta = {("copy", "bidirectional"): [0.6] * 8, ("copy", "causal"): [0.1] * 8}
    training = made_up_training(ordered(8), {}, beta=beta)
    proxies, effects = toys.proxy_effects(training, seed=0), effects_of(training)
    copy, markov = toys.proxy_readings(training, proxies, effects)
    assert copy.level.startswith("masked LM +0.60 (+0.60)")
    wqk = effects["copy", "W_qk", "symmetry"]
    assert (copy.proxy, copy.wqk) == (prose.effect_line(proxies["copy"]), prose.effect_line(wqk))
    assert (copy.together, markov.together) == (stats.HOLDS, stats.CANNOT_TELL)


# --- figure titles ------------------------------------------------------------------------------------------------


def toy_training():
    """Two tasks, two objectives, one parameterisation, two seeds, two steps."""
    dims = ("task", "objective", "parameterisation", "seed", "step")
    symmetry = np.zeros((2, 2, 1, 2, 2))
    symmetry[0, 0, 0, :, -1] = [0.8, 0.6]  # copy, bidirectional: median 0.7
    symmetry[0, 1, 0, :, -1] = [0.1, 0.1]
    symmetry[1, 0, 0, :, -1] = [0.2, 0.2]
    symmetry[1, 1, 0, :, -1] = [0.5, 0.5]
    coords = {"task": ["copy", "markov"], "objective": ["bidirectional", "causal"], "parameterisation": ["W_qk"]}
    return xr.Dataset(
        {
            "symmetry": (dims, symmetry),
            "directionality": (dims, np.full(symmetry.shape, 0.9)),
            "beta_symmetry": (dims, symmetry),
        },
        coords=coords | {"step": [0, 50]},
    )


def test_the_final_symmetry_is_compared_per_task():
    copy, markov = toys.final_symmetry_by_task(toy_training())
    assert (copy.task, copy.masked, copy.causal, copy.relation, copy.first) == (
        "copy",
        "+0.70",
        "+0.10",
        "more symmetric than",
        True,
    )
    assert (markov.short, markov.first) == ("less", False)


def test_the_final_symmetry_per_task_is_the_mean_over_seeds_as_the_verdict_reads_it():
    training = xr.concat([toy_training(), toy_training().isel(seed=[0])], "seed")
    training["symmetry"][0, 0, 0, 2, -1] = 0.0  # copy, bidirectional: 0.8, 0.6, 0.0, mean 0.47, median 0.6
    copy, _ = toys.final_symmetry_by_task(training)
    assert copy.masked == "+0.47"


@pytest.mark.parametrize(
    "a, b, relation, short",
    [
        (0.5, 0.1, "more symmetric than", "more"),
        (0.1, 0.5, "less symmetric than", "less"),
        (0.301, 0.299, "as symmetric as", "as symmetric"),
    ],
)
def test_the_comparison_is_made_at_the_printed_precision(a, b, relation, short):
    values = xr.DataArray(
        [[a, b]], dims=("task", "objective"), coords={"task": ["copy"], "objective": ["bidirectional", "causal"]}
    )
    (facts,) = toys._by_task(values)
    assert (facts.relation, facts.short) == (relation, short)


def test_the_final_directionality_is_counted_inside_the_null():
    facts = toys.directionality_inside_null(toy_training(), np.linspace(-1, 1, 401))
    assert (facts.inside, facts.finals) == ("8", "8 final scores")


def test_the_context_before_query_is_the_share_below_the_diagonal():
    causal, bidirectional = np.tril(np.ones((4, 4))), np.ones((4, 4))
    roles = xr.Dataset(
        {"pair_probability": (("objective", "position", "context_position"), np.stack([bidirectional, causal]))},
        coords={"objective": ["bidirectional", "causal"]},
    )
    assert toys.context_before_query(roles) == toys.PairShareFacts(causal="100%", bidirectional="50%")
