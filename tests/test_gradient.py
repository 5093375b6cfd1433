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
    from attnstruct import copy_task as T

    def run(seed):
        gen = torch.Generator().manual_seed(seed)
        tokens = T.repeated_sequences(40, 8, 16, 1.0, gen)
        model = T.OneLayer(16, 8, 8, factorised=False, gen=gen)
        out = T.accumulated_updates(
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
    first = T.repeated_sequences(4000, 2, 16, 1.5, torch.Generator().manual_seed(0))[:, 0]
    assert int(torch.bincount(first, minlength=16).argmax()) == 0, "token 0 is the most frequent (Zipf)"
    with pytest.raises(ValueError, match="even"):
        T.repeated_sequences(2, 7, 16, 1.0, torch.Generator())


def test_masked_lm_batches():
    from attnstruct import copy_task as T

    tokens = T.repeated_sequences(30, 8, 16, 1.0, torch.Generator().manual_seed(0))
    ids, targets, predict, mask = T.batch_for("bidirectional", tokens, 16, 0.15, torch.Generator().manual_seed(1))
    assert predict.any(1).all(), "every sequence predicts at least one token"
    assert (ids[predict] == 16).all() and (ids[~predict] == tokens[~predict]).all() and mask.all()
    ids, targets, predict, mask = T.batch_for("causal", tokens, 16, 0.15, torch.Generator())
    assert torch.equal(targets[:, :-1], tokens[:, 1:]) and not predict[:, -1].any()


def test_toy_training_records_scores_and_is_reproducible():
    from attnstruct import copy_task as T

    kw = dict(vocab=16, seq_len=8, d_model=8, steps=10, batch=8, lr=1e-2, mask_rate=0.3, zipf=1.0, every=5, seed=0)
    for factorised in (False, True):
        rec = T.train(T.CopyTaskConfig(factorised=factorised, **kw))
        assert list(rec["step"]) == [0, 5, 10]
        assert all(-1 <= v <= 1 for v in rec["symmetry"]) and rec["wqk"].shape == (8, 8)
    again = T.train(T.CopyTaskConfig(factorised=True, **kw))
    assert (again["symmetry"] == rec["symmetry"]).all()
    with pytest.raises(ValueError, match="unknown optimizer 'lbfgs'"):
        T.CopyTaskConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="CopyTaskConfig needs the parameters factorised"):
        T.CopyTaskConfig.from_params(kw, objective="causal", optimizer="adam")
