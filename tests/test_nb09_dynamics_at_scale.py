"""Notebook 09's analysis on made-up series with a known answer: the entries, the joined scores, the plan, the
verdicts of pairs, trajectories and continued training, and the catalogue of public series."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import local_series
from attnstruct.analyses import nb05_training_dynamics as two_objectives
from attnstruct.analyses import nb09_dynamics_at_scale as at_scale
from attnstruct.checkpoints import series

SHAPES = {"17m": (64, 4, 3), "32m": (96, 6, 4), "68m": (128, 8, 5)}  # (d_model, n_heads, n_layers)


def fake_sweep(medians: dict[str, tuple[float, int, int, int]], *, stacks=None, rng=None) -> xr.Dataset:
    """A sweep.nc-shaped dataset: each model's one stack has layers scattered tightly around its given median."""
    rng = rng or np.random.default_rng(0)
    depth = max(n for *_, n in medians.values())
    models = list(medians)
    symmetry = np.full((len(models), 2, depth), np.nan)
    directionality = np.full_like(symmetry, np.nan)
    d_model, n_heads = np.full_like(symmetry, np.nan), np.full_like(symmetry, np.nan)
    for i, (model, (value, width, heads, layers)) in enumerate(medians.items()):
        stack = (stacks or {}).get(model, 0)
        symmetry[i, stack, :layers] = value + 0.001 * rng.standard_normal(layers)
        directionality[i, stack, :layers] = -value + 0.001 * rng.standard_normal(layers)
        d_model[i, stack, :layers], n_heads[i, stack, :layers] = width, heads
    dims = ("model", "stack", "layer")
    return xr.Dataset(
        {
            "symmetry": (dims, symmetry),
            "directionality": (dims, directionality),
            "d_model": (dims, d_model),
            "n_heads": (dims, n_heads),
        },
        coords={
            "model": models,
            "stack": ["encoder", "decoder"],
            "layer": np.arange(depth),
            "phase": ("model", np.zeros(len(models))),
            "family": ("model", ["f"] * len(models)),
            "n_params": ("model", np.full(len(models), 1e6)),
            "bytes_fetched": ("model", np.full(len(models), 1000.0)),
        },
    )


def entry(model, kind, name, role, unit, seed=-1, stage="", step=math.nan, tokens=math.nan):
    return dict(
        model=model, kind=kind, series=name, role=role, unit=unit, seed=seed, stage=stage, step=step, tokens=tokens
    )


def pairs_case(gap: float):
    """Ettin-like pairs of three sizes: the encoder's median symmetry exceeds the decoder's by ``gap``."""
    rows, medians = [], {}
    for size, (width, heads, layers) in SHAPES.items():
        for role, value in (("encoder", 0.1 + gap), ("decoder", 0.1)):
            medians[f"{role}-{size}"] = (value, width, heads, layers)
            rows.append(entry(f"{role}-{size}", "pair", "ettin", role, size))
    return pd.DataFrame(rows, columns=list(series.ENTRY_COLUMNS)), fake_sweep(medians)


def seed_pairs_case(gaps):
    rows, medians = [], {}
    for seed, gap in enumerate(gaps):
        for role, value in (("encoder", 0.2 + gap), ("decoder", 0.2)):
            medians[f"{role}-{seed}"] = (value, 64, 4, 4)
            rows.append(entry(f"{role}-{seed}", "pair", "seeded pairs", role, f"seed {seed}", seed))
    return pd.DataFrame(rows, columns=list(series.ENTRY_COLUMNS)), fake_sweep(medians)


def test_checkpoint_scores_joins_entries_and_lists_the_models_the_sweep_lacks():
    entries, sweep = pairs_case(0.3)
    entries = pd.concat([entries, pd.DataFrame([entry("gone", "pair", "ettin", "encoder", "1b")])], ignore_index=True)
    ds, missing = at_scale.checkpoint_scores(entries, sweep)
    assert missing == ["gone"] and ds.sizes["checkpoint"] == 6
    assert list(ds["n_layers"].values) == [3, 3, 4, 4, 5, 5] and list(ds["d_model"].values[:2]) == [64, 64]
    np.testing.assert_allclose(at_scale.median_over_layers(ds, "symmetry").values[::2], 0.4, atol=0.01)
    two = fake_sweep({"m": (0.1, 64, 4, 4)}, stacks={})
    two["symmetry"][0, 1, :] = 0.0  # a second stack: not a series checkpoint
    with pytest.raises(ValueError, match="one self-attention stack"):
        at_scale.checkpoint_scores(pd.DataFrame([entry("m", "pair", "s", "encoder", "1")]), two)


def test_the_plan_makes_each_pair_series_symmetry_primary_and_everything_else_secondary():
    rows = [
        entry("a", "pair", "ettin", "encoder", "17m"),
        entry("b", "trajectory", "pythia", "decoder", "seed 0", 0, step=0.0),
        entry("c", "cross", "ettin decoder continued as encoder", "encoder", "17m", stage="before"),
    ]
    plan = at_scale.declared_plan(pd.DataFrame(rows, columns=list(series.ENTRY_COLUMNS)))
    roles = {claim.name: claim.role for claim in plan.claims}
    assert roles == {
        "ettin: encoder minus decoder, median symmetry": "primary",
        "ettin: encoder minus decoder, median directionality": "secondary",
        "pythia: final median directionality minus an untrained layer's": "secondary",
        "ettin decoder continued as encoder: median symmetry after minus before": "secondary",
    }
    assert plan.claim("ettin: encoder minus decoder, median symmetry").unit == "size"


@pytest.mark.parametrize("gap, verdict", [(0.3, stats.CANNOT_TELL), (0.0, stats.CANNOT_TELL)])
def test_three_sizes_cannot_reach_a_verdict_whatever_the_gap(gap, verdict):
    """Three units: a sign-flip test cannot go below p = 1/8, so even a large gap reads cannot tell."""
    entries, sweep = pairs_case(gap)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    symmetry, _ = at_scale.pair_effects(ds, at_scale.declared_plan(entries), n_draws=20)
    assert symmetry.verdict == verdict and symmetry.n == 3 and abs(symmetry.estimate - gap) < 0.01


def test_six_seeds_with_a_large_gap_hold_and_the_flip_does_not_hold():
    entries, sweep = seed_pairs_case([0.3, 0.25, 0.35, 0.3, 0.28, 0.32])
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    symmetry, direction = at_scale.pair_effects(ds, at_scale.declared_plan(entries), n_draws=20)
    assert symmetry.verdict == stats.HOLDS and symmetry.family.startswith("primary")
    # the fake directionality is minus the symmetry: the encoder is the lower one, against the prediction
    assert direction.verdict == stats.DOES_NOT_HOLD and direction.estimate < 0
    flipped, flipped_sweep = seed_pairs_case([-0.3, -0.25, -0.35, -0.3, -0.28, -0.32])
    ds, _ = at_scale.checkpoint_scores(flipped, flipped_sweep)
    plan = at_scale.declared_plan(flipped)
    assert at_scale.pair_effects(ds, plan, n_draws=20)[0].verdict == stats.DOES_NOT_HOLD
    unlearned = at_scale.pair_effects(ds, plan, n_draws=20, learned={"seeded pairs": False})[0]
    assert unlearned.verdict == stats.CANNOT_TELL and unlearned.reason == stats.NOT_LEARNED


def test_a_shape_null_is_drawn_for_pairs_of_independent_starts():
    """Pairs of sizes are read against untrained stacks of their shapes: a gap inside that null's range is not
    beyond it, even with a clean sign."""
    entries, sweep = pairs_case(0.001)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    symmetry = at_scale.pair_effects(ds, at_scale.declared_plan(entries), n_draws=20)[0]
    assert symmetry.null is not None and symmetry.null.null_low < 0.001 < symmetry.null.null_high


def trajectory_case(final: float, role: str, seeds: int = 6):
    rows, medians = [], {}
    for seed in range(seeds):
        for step, value in ((0, 0.0), (100, final / 2), (1000, final)):
            model = f"{role}-s{seed}@step{step}"
            medians[model] = (value + 0.01 * seed, 64, 4, 4)
            rows.append(entry(model, "trajectory", f"{role} run", role, f"seed {seed}", seed, "", step, step * 10.0))
    return pd.DataFrame(rows, columns=list(series.ENTRY_COLUMNS)), fake_sweep(medians)


def test_a_trajectory_is_judged_at_each_seeds_last_checkpoint_against_an_untrained_layer():
    entries, sweep = trajectory_case(0.5, "encoder")
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (effect,) = at_scale.trajectory_effects(ds, at_scale.declared_plan(entries), n_draws=50)
    assert effect.verdict == stats.HOLDS and effect.n == 6 and effect.claim.startswith("encoder run: final median sym")
    assert list(at_scale.last_checkpoints(ds, "encoder run")["step"].values) == [1000.0] * 6
    lines = at_scale.trajectory_lines(ds, "encoder run", "symmetry")
    assert len(lines) == 18 and lines.groupby("seed")["step"].apply(list).iloc[0] == [0.0, 100.0, 1000.0]
    # a decoder's claim is about directionality, predicted below the null: the fake directionality is -0.5
    entries, sweep = trajectory_case(0.5, "decoder")
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (effect,) = at_scale.trajectory_effects(ds, at_scale.declared_plan(entries), n_draws=50)
    assert "directionality" in effect.claim and effect.verdict == stats.HOLDS


def decoder_finals_case(finals):
    """A decoder trajectory whose last checkpoints have median directionality ``finals`` (one per seed)."""
    rows, medians = [], {}
    for seed, final in enumerate(finals):
        for step, value in ((0, 0.0), (1000, -final)):
            model = f"decoder-s{seed}@step{step}"
            medians[model] = (value, 64, 4, 4)
            rows.append(entry(model, "trajectory", "decoder run", "decoder", f"seed {seed}", seed, "", step, step))
    return pd.DataFrame(rows, columns=list(series.ENTRY_COLUMNS)), fake_sweep(medians)


def test_notebooks_05_and_09_reach_one_verdict_on_the_same_decoders_for_any_generator_seed():
    entries, sweep = decoder_finals_case([-0.45, -0.51, -0.60, -0.07, -0.28])  # the per-seed values
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    last = at_scale.last_checkpoints(ds, "decoder run")
    per_seed = xr.DataArray(at_scale.median_over_layers(last, "directionality").values, dims="seed")
    for seed in range(20):
        (at_09,) = at_scale.trajectory_effects(ds, at_scale.declared_plan(entries), n_draws=200, seed=seed)
        at_05 = two_objectives.against_null_effect(
            per_seed,
            claim="decoder",
            score="directionality",
            shape=two_objectives.Shape(64, 4, 4),
            predicted_sign=-1,
            n_draws=400,
            seed=seed,
        )
        assert (at_05.estimate, at_05.verdict) == (at_09.estimate, at_09.verdict), seed
        assert at_05.null.null_median == 0.0 and at_09.null.null_median == 0.0


def cross_case(change: float, role: str, units: int = 6):
    rows, medians = [], {}
    for u in range(units):
        for stage, value in (("before", 0.1), ("after", 0.1 + change + 0.01 * u)):
            medians[f"{stage}-{u}"] = (value, 64, 4, 4)
            rows.append(entry(f"{stage}-{u}", "cross", f"to {role}", role, f"size{u}", stage=stage))
    return pd.DataFrame(rows, columns=list(series.ENTRY_COLUMNS)), fake_sweep(medians)


@pytest.mark.parametrize(
    "change, role, verdict",
    [(0.3, "encoder", stats.HOLDS), (-0.3, "decoder", stats.HOLDS), (-0.3, "encoder", stats.DOES_NOT_HOLD)],
)
def test_continued_training_reads_after_minus_before_in_the_direction_of_the_new_objective(change, role, verdict):
    entries, sweep = cross_case(change, role)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (effect,) = at_scale.cross_effects(ds, at_scale.declared_plan(entries))
    assert effect.verdict == verdict and effect.unit == "size"
    table = at_scale.before_and_after(ds, f"to {role}")
    np.testing.assert_allclose(table["change"], change + 0.01 * np.arange(6), atol=0.01)


def test_bytes_needed_counts_each_model_once_and_the_share_of_its_files():
    entries, sweep = seed_pairs_case([0.1, 0.2])
    doubled = pd.concat([entries, entries.assign(kind="trajectory", series="seeded pairs")], ignore_index=True)
    ds, _ = at_scale.checkpoint_scores(doubled, sweep)
    table = at_scale.bytes_needed(ds, {m: 10_000 for m in entries["model"]})
    assert table.loc["seeded pairs", "checkpoints"] == 4 and table.loc["seeded pairs", "bytes"] == 4000
    assert table.loc["seeded pairs", "share of files"] == pytest.approx(0.1)
    read = at_scale.bytes_read(table)
    assert (read.checkpoints, read.share, read.share_known) == ("4 checkpoints", "10.0%", True)
    assert (read.total, read.per_checkpoint) == ("4.0 kB", "1.0 kB")


def test_the_pair_facts_count_the_units_where_the_encoder_is_more_symmetric():
    entries, sweep = seed_pairs_case([0.3, 0.25, 0.35, -0.1, 0.28, 0.32])
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (pair,) = at_scale.pairs(ds)
    assert (pair.series, pair.more, pair.total, pair.units) == ("seeded pairs", "5", "6", "6 seeds")
    assert pair.gap == "-0.10 to +0.35"


def test_the_primary_facts_name_each_primary_claim_with_its_verdict_and_units():
    entries, sweep = seed_pairs_case([0.3, 0.25, 0.35, -0.1, 0.28, 0.32])
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    effects = at_scale.pair_effects(ds, at_scale.declared_plan(entries), n_draws=20)
    (primary,) = at_scale.primary_verdicts(effects)
    assert primary.claim == "seeded pairs: encoder minus decoder, median symmetry"
    assert primary.verdict == effects[0].verdict and primary.n == "6"
    assert at_scale.verdict_counts([]).counts == "no claim tested"
    assert at_scale.verdict_counts(effects).counts == ", ".join(f"1 {e.verdict}" for e in effects)


def test_the_trajectory_facts_give_each_series_reach_peak_end_and_final_value():
    entries, sweep = trajectory_case(0.5, "encoder", seeds=2)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (trajectory,) = at_scale.trajectories(ds)
    assert (trajectory.series, trajectory.seeds, trajectory.reaches, trajectory.on_tokens) == (
        "encoder run",
        "2 seeds",
        "1e+04",
        True,
    )
    assert (trajectory.peak, trajectory.end, trajectory.final) == ("+0.51", "+0.51", "+0.51")


@pytest.mark.parametrize("role, direction", [("encoder", "rose"), ("decoder", "fell")])
def test_the_cross_facts_count_the_units_that_moved_the_way_the_new_objective_predicts(role, direction):
    entries, sweep = cross_case(0.3, role, units=3)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (cross,) = at_scale.crosses(ds)
    assert (cross.direction, cross.units, cross.change, cross.mean_change) == (
        direction,
        "3 sizes",
        "+0.30 to +0.32",
        "+0.31",
    )
    assert cross.moved == ("3" if role == "encoder" else "0")


def test_the_learned_facts_name_the_series_whose_runs_did_not_learn():
    assert at_scale.learned_runs({}) == at_scale.LearnedFacts(all_learned=True, not_learned="")
    facts = at_scale.learned_runs({"local pairs": False, "local encoder": True, "local decoder": False})
    assert facts == at_scale.LearnedFacts(all_learned=False, not_learned="local pairs, local decoder")


def test_thinned_step_indices_keep_the_ends_and_spread_the_rest_in_log_steps():
    pythia = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, *range(1000, 143001, 1000)]
    kept = series.thinned_step_indices(pythia, 8)
    assert kept[0] == 0 and kept[-1] == len(pythia) - 1 and len(kept) <= 8
    steps = np.log1p(np.array(pythia, dtype=float)[kept])
    assert np.diff(steps).min() > 0.5  # no two kept checkpoints crowd together in log(1 + step)
    assert series.thinned_step_indices([5, 6, 7], 8) == [0, 1, 2] and series.thinned_step_indices(
        range(10), 3, log=False
    ) == [0, 4, 9]
    with pytest.raises(ValueError, match="at least 2"):
        series.thinned_step_indices(pythia, 1)


def test_query_key_bytes_counts_both_weights_their_rows_and_biases():
    assert series.query_key_bytes(1, 4, 2, 2) == (4 + 4) * 4 * 4  # 4 query rows, 4 key rows of 4 floats
    assert series.query_key_bytes(12, 768, 12, 64, bytes_per_value=2, bias=True) == 12 * 1536 * 769 * 2
    assert series.query_key_bytes(2, 64, 8, 8, n_kv_heads=2) == 2 * (64 + 16) * 64 * 4
    with pytest.raises(ValueError, match="d_head must be a positive integer"):
        series.query_key_bytes(1, 4, 2, 0)


def test_the_catalogued_pairs_and_crosses_need_no_hub_and_name_every_size():
    table = series.entries(pairs=["ettin"], crosses=list(series.CROSSES))
    pairs = table[table["kind"] == "pair"]
    assert list(pairs["unit"].unique()) == list(series.ETTIN_SIZES) and set(pairs["role"]) == {"encoder", "decoder"}
    cross = table[(table["kind"] == "cross") & (table["stage"] == "after")]
    assert "jhu-clsp/ettin-enc-from-dec-150m" in set(cross["model"])
    with pytest.raises(ValueError, match="unknown series nope; known: ettin"):
        series.entries(pairs=["nope"])


@pytest.mark.hub
def test_a_trajectory_lists_a_repositorys_revisions_thinned_in_training_order(hub, repos):
    for step in (0, 1, 2, 4, 100, 1000, 5000):
        hub.add_folder("org/run", repos["tiny/bert"], revision=f"step{step}")
    hub.add_folder("org/run", repos["tiny/bert"], revision="ext10", tag=True)
    trajectory = series.Trajectory("run", "encoder", ("org/run",), r"^(step|ext)\d+$", 100.0)
    rows = pd.DataFrame(series.trajectory_entries(trajectory, max_checkpoints=4))
    assert rows["model"].iloc[0] == "org/run@step0" and rows["model"].iloc[-1] == "org/run@ext10"
    assert len(rows) <= 4 and set(rows["kind"]) == {"trajectory"} and (rows["seed"] == 0).all()
    plain = series.Trajectory("run", "encoder", ("org/run",), r"^step\d+$", 100.0)
    rows = pd.DataFrame(series.trajectory_entries(plain, max_checkpoints=3))
    assert list(rows["step"]) == [0.0, 100.0, 5000.0] and list(rows["tokens"]) == [0.0, 10_000.0, 500_000.0]


def test_the_local_series_plan_is_the_one_its_entries_declare():
    from attnstruct.analyses import plans

    assert plans.plan_of("09_dynamics_at_scale") is at_scale.PLAN
    names = [claim.name for claim in at_scale.PLAN.claims]
    assert names[0] == "local pairs: encoder minus decoder, median symmetry"
    assert set(names) == {claim.name for claim in at_scale.declared_plan(local_series.plan_entries()).claims}


def test_offline_the_pairs_that_re_read_notebook_05s_runs_are_not_a_primary_claim():
    """Offline, the local pairs are notebook 05's final encoders and decoders read with 05's statistic and null: a
    check of the code path, counted once, in 05."""
    claim = at_scale.PLAN.claim("local pairs: encoder minus decoder, median symmetry")
    assert claim.role == "secondary" and "notebook 05" in claim.null
    entries, sweep = seed_pairs_case([0.3, 0.25, 0.35, 0.3, 0.28, 0.32])
    local = entries.assign(series=local_series.PAIRS)
    ds, _ = at_scale.checkpoint_scores(local, sweep)
    symmetry, _ = at_scale.pair_effects(ds, at_scale.declared_plan(local), n_draws=20)
    assert symmetry.family == "secondary, uncorrected" and at_scale.primary_verdicts([symmetry]) == []


@pytest.mark.checkpoint  # the packaged plays
def test_the_tokens_of_notebook_05s_runs_are_found_from_its_parameters(tmp_path):
    parameters = local_series.notebook_05_parameters(tmp_path)  # no dataset there: the notebook's defaults
    tokens = local_series.notebook_05_tokens(parameters)
    assert tokens.vocab_size == parameters["vocab_size"] and tokens.source == "shakespeare"
    assert 0 < tokens.unigram_entropy() < math.log(tokens.vocab_size)


@pytest.mark.parametrize("keep", [12, 16])
def test_multiberts_keeps_as_many_checkpoints_per_seed_as_asked_each_at_a_finite_step(keep):
    """MultiBERTs names its 29 checkpoints per seed ``-step_0k`` to ``-step_2000k``; the final one is also a
    repository without a step in its name, which must not stand in for the last (its step would be unknown)."""
    rows = pd.DataFrame(series.trajectory_entries(series.TRAJECTORIES["multiberts"], max_checkpoints=keep))
    assert rows.groupby("seed").size().tolist() == [keep] * 5
    assert np.isfinite(rows["step"]).all() and np.isfinite(rows["tokens"]).all()
    last = rows.groupby("seed").tail(1)
    assert last["step"].tolist() == [2_000_000.0] * 5 and last["model"].iloc[0] == "google/multiberts-seed_0-step_2000k"
    assert all(len(run) == 29 for run in series.TRAJECTORIES["multiberts"].runs)


def test_a_trajectory_leaves_out_checkpoints_byte_identical_to_a_later_one_of_their_run_and_lists_them():
    """Later weights copied into earlier branches (EleutherAI/pythia#205, #206, allenai/OLMo#915) would draw a false
    plateau: of a run's byte-identical checkpoints only the latest stays; another run's copy is its own."""
    entries, sweep = trajectory_case(0.5, "encoder", seeds=2)
    digests = {model: f"{i:064x}" for i, model in enumerate(sweep["model"].values)}
    digests["encoder-s0@step100"] = digests["encoder-s0@step1000"]  # the final weights in an earlier branch
    digests["encoder-s1@step0"] = digests["encoder-s0@step0"]  # one start shared by two seeds: not a copy in a run
    sweep = sweep.assign_coords(weights_sha256=("model", [digests[m] for m in sweep["model"].values]))
    ds, missing = at_scale.checkpoint_scores(entries, sweep)
    assert missing == [] and "encoder-s0@step100" not in set(ds["model"].values) and ds.sizes["checkpoint"] == 5
    assert at_scale.left_out_copies(ds) == {"encoder-s0@step100": "encoder-s0@step1000"}
    assert ds["weights_sha256"].values[0] == digests["encoder-s0@step0"]  # recorded in notebook 09's dataset
    facts = at_scale.scored(ds, missing)
    assert (facts.any_copies, facts.copies, facts.digests_known, facts.all_scored) == (True, "1 checkpoint", True, True)
    assert facts.left_out == "`encoder-s0@step100` (as `encoder-s0@step1000`)"


def continuation_case(other: float, same: float, seeds: int = 6):
    """Notebook 05's decoders of ``seeds`` seeds continued as encoders (median symmetry up by ``other`` + a spread)
    and as decoders, the control (up by ``same``), from the same snapshots."""
    rows, medians = [], {}
    series_of_kind = {"cross": "local decoder continued as encoder", "control": "local decoder continued as decoder"}
    for seed in range(seeds):
        medians[f"start-{seed}"] = (0.1, 64, 4, 4)
        for kind, change, role in (("cross", other, "encoder"), ("control", same, "decoder")):
            medians[f"{kind}-{seed}"] = (0.1 + change + 0.01 * seed, 64, 4, 4)
            name = series_of_kind[kind]
            rows.append(entry(f"start-{seed}", kind, name, role, f"seed {seed}", seed, stage="before"))
            rows.append(entry(f"{kind}-{seed}", kind, name, role, f"seed {seed}", seed, stage="after"))
    return pd.DataFrame(rows, columns=list(series.ENTRY_COLUMNS)), fake_sweep(medians)


def test_the_local_plan_declares_each_continuation_against_its_same_objective_control():
    contrasts = [c for c in at_scale.PLAN.claims if "continued as" in c.name and "minus" in c.name.split(":")[0]]
    assert sorted(c.name for c in contrasts) == sorted(
        at_scale.CONTRAST_CLAIM.format(series=s, control=local_series.control_of(s))
        for s in ("local decoder continued as encoder", "local encoder continued as decoder")
    )
    assert all(c.role == "secondary" and c.unit == "seed" and "sign-flip" in c.test for c in contrasts)


@pytest.mark.parametrize(
    "other, same, verdict",
    [
        (0.3, 0.05, stats.HOLDS),  # the objective moves symmetry beyond the restart alone
        (0.05, 0.3, stats.DOES_NOT_HOLD),  # the restart alone moves it more
    ],
)
def test_the_contrast_is_the_change_under_the_other_objective_minus_under_the_same(other, same, verdict):
    entries, sweep = continuation_case(other, same)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (contrast,) = at_scale.contrast_effects(ds, at_scale.declared_plan(entries))
    assert contrast.verdict == verdict and contrast.n == 6 and contrast.alternative == "greater"
    assert contrast.estimate == pytest.approx(other - same, abs=1e-3)


def test_a_restart_that_moves_both_arms_alike_is_no_effect_of_the_objective():
    """Both arms gain the same symmetry after the warm-up: continued training alone holds, the contrast does not."""
    entries, sweep = continuation_case(0.2, 0.2)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    plan = at_scale.declared_plan(entries)
    (alone,) = at_scale.cross_effects(ds, plan)
    (contrast,) = at_scale.contrast_effects(ds, plan)
    assert alone.verdict == stats.HOLDS and contrast.verdict != stats.HOLDS
    assert abs(contrast.estimate) < 1e-3


def test_the_contrast_facts_count_the_seeds_where_the_other_objective_moved_further():
    entries, sweep = continuation_case(0.3, 0.05, seeds=5)
    ds, _ = at_scale.checkpoint_scores(entries, sweep)
    (facts,) = at_scale.contrasts(ds)
    assert (facts.series, facts.control, facts.further, facts.units) == (
        "local decoder continued as encoder",
        "local decoder continued as decoder",
        "5",
        "5 seeds",
    )
    assert facts.contrast == "+0.25" and facts.direction == "rose"


def test_the_pairs_source_says_when_the_pairs_re_read_notebook_05():
    assert at_scale.pairs_source(local_series.plan_entries()).rereads_05
    entries, _ = pairs_case(0.1)
    assert at_scale.pairs_source(entries) == at_scale.PairsSourceFacts(False, "ettin")
