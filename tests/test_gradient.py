"""The analytic gradient of the loss with respect to W_qk equals autograd's, for both objectives."""

import numpy as np
import pytest
import torch

from attnstruct import gradient as G


def setup(heads, objective, include_self=True, seed=0, b=3, n=7, d=6, dv=4, vocab=11):
    gen = torch.Generator().manual_seed(seed)
    kw = dict(generator=gen, dtype=torch.float64)
    x = torch.randn(b, n, d, **kw)
    w_qk = torch.randn(heads, d, d, **kw) * 0.5
    w_v = torch.randn(heads, d, dv, **kw)
    w_o = torch.randn(heads, dv, d, **kw)
    unembed = torch.randn(vocab, d, **kw)
    targets = torch.randint(0, vocab, (b, n), generator=gen)
    predict = torch.rand(b, n, generator=gen) < 0.6
    predict[:, 0] = True
    mask = G.context_mask(n, objective, include_self=include_self)
    return x, w_qk, w_v, w_o, unembed, targets, predict, mask, d**-0.5


@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize(
    "objective, include_self", [("bidirectional", True), ("bidirectional", False), ("causal", True)]
)
def test_analytic_gradient_equals_autograd(heads, objective, include_self):
    x, w_qk, w_v, w_o, unembed, targets, predict, mask, scale = setup(heads, objective, include_self)
    w = w_qk.clone().requires_grad_(True)
    _, _, logits = G.forward(x, w, w_v, w_o, unembed, mask, scale)
    G.loss(logits, targets, predict).backward()
    grad, beta = G.analytic_gradient(x, w_qk, w_v, w_o, unembed, targets, predict, mask, scale)
    torch.testing.assert_close(grad, w.grad, rtol=1e-10, atol=1e-12)
    assert bool((beta[..., ~mask] == 0).all()), "beta vanishes outside the context sets"
    # one sequence, head 0: the sum of outer products beta_ij x_i x_j^T written term by term
    one, beta1 = G.analytic_gradient(x[:1], w_qk, w_v, w_o, unembed, targets[:1], predict[:1], mask, scale)
    n = x.shape[1]
    explicit = sum(beta1[0, 0, i, j] * torch.outer(x[0, i], x[0, j]) for i in range(n) for j in range(n))
    torch.testing.assert_close(one[0], explicit, rtol=1e-10, atol=1e-12)


def test_context_masks_and_role_counts():
    assert G.context_mask(3, "causal").tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert not G.context_mask(3, "bidirectional", include_self=False).diagonal().any()
    with pytest.raises(ValueError, match="objective"):
        G.context_mask(3, "autoregressive")
    predict = torch.ones(1, 4, dtype=torch.bool)
    q, c = G.role_counts(predict, G.context_mask(4, "causal"))
    assert q.tolist() == [1, 1, 1, 1] and c.tolist() == [4, 3, 2, 1]
    q, c = G.role_counts(predict, G.context_mask(4, "bidirectional"))
    assert c.tolist() == [4, 4, 4, 4]


def test_toy_sequences_and_accumulated_updates_are_reproducible():
    from attnstruct.tasks import toy_tasks

    def run(seed):
        gen = torch.Generator().manual_seed(seed)
        tokens = toy_tasks.repeated_sequences(40, 8, 16, 1.0, gen)
        model = toy_tasks.OneLayer(16, 8, 8, factorised=False, gen=gen)
        out = toy_tasks.accumulated_updates(
            model, tokens, "causal", [5, 20], mask_rate=0.15, gen=torch.Generator().manual_seed(1)
        )
        return tokens, out

    tokens, a = run(0)
    _, b = run(0)
    assert tokens.shape == (40, 8) and int(tokens.max()) < 16
    assert torch.equal(tokens[:, :4], tokens[:, 4:]), "the second half repeats the first"
    assert a["symmetry"] == b["symmetry"] and (a["update"] == b["update"]).all()
    assert len(a["symmetry"]) == 2 and a["update"].shape == (8, 8)
    assert (np.triu(a["beta"], 1) == 0).all(), "causal coefficients live on and below the diagonal"
    first = toy_tasks.repeated_sequences(4000, 2, 16, 1.5, torch.Generator().manual_seed(0))[:, 0]
    assert int(torch.bincount(first, minlength=16).argmax()) == 0, "token 0 is the most frequent (Zipf)"
    with pytest.raises(ValueError, match="even"):
        toy_tasks.repeated_sequences(2, 7, 16, 1.0, torch.Generator())


def test_masked_lm_batches():
    from attnstruct.tasks import toy_tasks

    tokens = toy_tasks.repeated_sequences(30, 8, 16, 1.0, torch.Generator().manual_seed(0))
    ids, targets, predict, mask = toy_tasks.batch_for(
        "bidirectional", tokens, 16, 0.15, torch.Generator().manual_seed(1)
    )
    assert predict.any(1).all(), "every sequence predicts at least one token"
    assert (ids[predict] == 16).all() and (ids[~predict] == tokens[~predict]).all() and mask.all()
    ids, targets, predict, mask = toy_tasks.batch_for("causal", tokens, 16, 0.15, torch.Generator())
    assert torch.equal(targets[:, :-1], tokens[:, 1:]) and not predict[:, -1].any()


def test_toy_training_records_scores_and_is_reproducible():
    from attnstruct.tasks import toy_tasks

    kw = dict(vocab=16, seq_len=8, d_model=8, steps=10, batch=8, lr=1e-2, mask_rate=0.3, zipf=1.0, every=5, seed=0)
    for factorised in (False, True):
        rec = toy_tasks.train(toy_tasks.CopyTaskConfig(factorised=factorised, **kw))
        assert list(rec["step"]) == [0, 5, 10]
        assert all(-1 <= v <= 1 for v in rec["symmetry"]) and rec["wqk"].shape == (8, 8)
    again = toy_tasks.train(toy_tasks.CopyTaskConfig(factorised=True, **kw))
    assert (again["symmetry"] == rec["symmetry"]).all()
    with pytest.raises(ValueError, match="unknown optimizer 'lbfgs'"):
        toy_tasks.CopyTaskConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="CopyTaskConfig needs the parameters factorised"):
        toy_tasks.CopyTaskConfig.from_params(kw, objective="causal", optimizer="adam")


def test_outer_product_sum_with_and_without_the_self_pairs():
    x, w_qk, w_v, w_o, unembed, targets, predict, mask, scale = setup(2, "causal")
    grad, beta = G.analytic_gradient(x, w_qk, w_v, w_o, unembed, targets, predict, mask, scale)
    torch.testing.assert_close(G.outer_product_sum(beta, x), grad, rtol=1e-12, atol=1e-14)
    b, n = x.shape[:2]
    for include_self in (True, False):
        brute = torch.stack(
            [
                sum(
                    beta[s, h, i, j] * torch.outer(x[s, i], x[s, j])
                    for s in range(b)
                    for i in range(n)
                    for j in range(n)
                    if include_self or i != j
                )
                for h in range(beta.shape[1])
            ]
        )
        torch.testing.assert_close(G.outer_product_sum(beta, x, include_self=include_self), brute)
    self_part = grad - G.outer_product_sum(beta, x, include_self=False)
    torch.testing.assert_close(self_part, self_part.transpose(-1, -2))  # the self-pairs add a symmetric matrix


def test_markov_chain_follows_its_fixed_transition_matrix():
    from attnstruct.tasks import toy_tasks

    t = toy_tasks.markov_transitions(16)
    assert t.shape == (16, 16) and torch.allclose(t.sum(1), torch.ones(16, dtype=torch.float64))
    assert torch.equal(t, toy_tasks.markov_transitions(16)), "one fixed matrix"
    assert not torch.equal(t, toy_tasks.markov_transitions(16, seed=toy_tasks.MARKOV_SEED + 1))
    tokens = toy_tasks.markov_sequences(3000, 6, 16, 1.0, torch.Generator().manual_seed(0))
    assert tokens.shape == (3000, 6) and tokens.dtype == torch.int64
    assert 0 <= int(tokens.min()) <= int(tokens.max()) < 16
    pairs = torch.stack([tokens[:, :-1].ravel(), tokens[:, 1:].ravel()])
    assert bool((t[pairs[0], pairs[1]] > 0).all()), "only transitions of positive probability occur"
    counts = torch.zeros(16, 16, dtype=torch.float64)
    counts.index_put_((pairs[0], pairs[1]), torch.ones(pairs.shape[1], dtype=torch.float64), accumulate=True)
    busiest = int(counts.sum(1).argmax())
    empirical = counts[busiest] / counts[busiest].sum()
    assert float((empirical - t[busiest]).abs().max()) < 0.05, "the next token is drawn from the current token's row"
    with pytest.raises(ValueError, match="unknown task 'markow'"):
        toy_tasks.sequences("markow", 2, 4, 16, 1.0, torch.Generator())


@pytest.mark.parametrize("task", ["copy", "markov"])
@pytest.mark.parametrize("objective", ["bidirectional", "causal"])
def test_a_training_batch_is_a_pure_function_of_seed_and_step(task, objective):
    from attnstruct.tasks import toy_tasks

    config = toy_tasks.CopyTaskConfig(objective=objective, vocab=16, seq_len=8, batch=5, seed=3)
    first = toy_tasks.training_batch(config, task, 7)
    toy_tasks.training_batch(config, task, 2)  # drawing another step first changes nothing
    again = toy_tasks.training_batch(config, task, 7)
    ids, targets, predict, mask = first
    assert ids.shape == targets.shape == predict.shape == (5, 8) and mask.shape == (8, 8)
    assert all(torch.equal(a, b) for a, b in zip(first, again))

    def changed(**kw):
        return toy_tasks.CopyTaskConfig(**{**config.to_dict(), **kw})

    for other in (toy_tasks.training_batch(config, task, 8), toy_tasks.training_batch(changed(seed=4), task, 7)):
        assert not torch.equal(other[1], targets)

    def sequences_of(objective_, targets_):  # the causal targets are the tokens shifted by one
        return targets_ if objective_ == "bidirectional" else torch.cat([targets_[:, -1:], targets_[:, :-1]], 1)

    other_objective = "causal" if objective == "bidirectional" else "bidirectional"
    other_targets = toy_tasks.training_batch(changed(objective=other_objective), task, 7)[1]
    tokens = sequences_of(objective, targets)
    assert torch.equal(tokens, sequences_of(other_objective, other_targets)), "both objectives see the same sequences"
    if task == "copy":
        assert torch.equal(tokens[:, :4], tokens[:, 4:])


def test_markov_training_runs_and_runs_collect_into_one_dataset():
    from attnstruct.tasks import toy_tasks

    kw = dict(vocab=16, seq_len=8, d_model=8, steps=10, batch=8, lr=1e-2, mask_rate=0.3, zipf=1.0, every=5)
    runs = {
        (task, objective, False, seed): toy_tasks.train(
            toy_tasks.CopyTaskConfig(objective=objective, seed=seed, **kw), task
        )
        for task in toy_tasks.TASKS
        for objective in G.OBJECTIVES
        for seed in (0, 1)
    }
    again = toy_tasks.train(toy_tasks.CopyTaskConfig(objective="causal", seed=1, **kw), "markov")
    assert (again["symmetry"] == runs["markov", "causal", False, 1]["symmetry"]).all()
    assert not (runs["copy", "causal", False, 1]["loss"] == again["loss"]).all()
    ds = toy_tasks.runs_dataset(runs)
    assert dict(ds.sizes) == {"task": 2, "objective": 2, "parameterisation": 1, "seed": 2, "step": 3}
    held_out = ds.held_out_loss.sel(task="markov", objective="causal", parameterisation="W_qk", seed=1)
    assert float(held_out) == again["held_out_loss"]
    assert list(ds.parameterisation.values) == ["W_qk"] and list(ds.task.values) == ["copy", "markov"]
    last = ds.symmetry.sel(task="markov", objective="causal", parameterisation="W_qk", seed=1, step=10)
    assert float(last) == again["symmetry"][-1]
    with pytest.raises(ValueError, match="unknown task"):
        toy_tasks.train(toy_tasks.CopyTaskConfig(**kw), "reverse")


def test_accumulated_updates_without_the_self_pairs():
    from attnstruct.tasks import toy_tasks

    gen = torch.Generator().manual_seed(0)
    model = toy_tasks.OneLayer(16, 8, 8, factorised=False, gen=gen)
    tokens = toy_tasks.markov_sequences(6, 8, 16, 1.0, gen)
    out = toy_tasks.accumulated_updates(model, tokens, "causal", [2, 6], mask_rate=0.15, gen=torch.Generator())
    diagonal = out["update"] - out["update_without_self"]
    np.testing.assert_allclose(diagonal, diagonal.T, atol=1e-12)
    assert len(out["symmetry_without_self"]) == 2 and out["symmetry"] != out["symmetry_without_self"]


def test_pair_frequencies_are_the_role_counts_pair_by_pair():
    from attnstruct.tasks import toy_tasks

    predict = torch.ones(1, 4, dtype=torch.bool)
    predict[:, -1] = False  # next-token prediction: the last position predicts nothing
    p = G.pair_frequencies(predict, G.context_mask(4, "causal"))
    expected = torch.tril(torch.ones(4, 4, dtype=torch.float64))
    expected[-1] = 0
    assert torch.equal(p, expected)
    tokens = toy_tasks.repeated_sequences(4000, 8, 16, 1.0, torch.Generator().manual_seed(0))
    asymmetry = {}
    for objective in G.OBJECTIVES:
        _, _, predict, mask = toy_tasks.batch_for(objective, tokens, 16, 0.15, torch.Generator().manual_seed(1))
        p = G.pair_frequencies(predict, mask)
        as_query, as_context = G.role_counts(predict, mask)
        torch.testing.assert_close(p.sum(0) * len(tokens), as_context)
        torch.testing.assert_close(p.sum(1) * len(tokens), as_query * mask.sum(1))
        asymmetry[objective] = float((p - p.T).abs().max())
    # masked LM: symmetric up to sampling noise (entries near 0.26, standard error near 0.007); next-token: triangular
    assert asymmetry["bidirectional"] < 0.05 and asymmetry["causal"] == 1.0
    with pytest.raises(ValueError, match="predict"):
        G.pair_frequencies(predict[0], mask)
