r"""The paper's two scores of a query-key matrix, from the matrix or from its factors.

Definitions (Saponati et al. 2025, section 2; the convention of their plots and tables):

* **symmetry** of ``M`` (``d x d``), with ``M_s = (M + M^T)/2`` and ``M_n = (M - M^T)/2``::

      s(M) = (||M_s||_F^2 - ||M_n||_F^2) / ||M||_F^2 = tr(M M) / tr(M^T M)        in [-1, 1]

  +1 for a symmetric matrix, -1 for a skew-symmetric one, about 0 for an i.i.d. Gaussian one.
  The second form holds because ``||M_s||^2 = (||M||^2 + tr(M M))/2`` and ``||M_n||^2 = (||M||^2 - tr(M M))/2``.

* **directionality** of ``M``: with row norms ``r_i = ||M[i, :]||`` and column norms ``c_j = ||M[:, j]||``,
  thresholds ``tau_r = mean(r) + num_std * std(r)`` and ``tau_c`` likewise (unbiased std, ``num_std = 2``),
  row excess ``R = sum_i max(r_i - tau_r, 0)`` and column excess ``C`` likewise::

      dir(M) = (R - C) / (R + C)        in [-1, 1],   0 when R = C = 0

  Negative means a few columns with outlying norms (column dominance, the autoregressive signature);
  positive means row dominance; any symmetric matrix scores exactly 0.

The authors' code stores other conventions; ``convention="raw"`` returns them (never the default):
symmetry ``||M_s||^2 / ||M||^2 = (1 + s)/2`` in [0, 1], and directionality with the opposite sign,
``(C - R)/(C + R)``.

Documented edge values:

* the zero matrix has no symmetry score: :func:`symmetry_score` raises ``ValueError``; its directionality is 0;
* a 1 x 1 matrix (nonzero) has symmetry 1 and directionality 0 (one row and one column cannot be outliers);
* NaN or inf entries, non-square, empty, complex or boolean input raise ``ValueError``;
* norm excesses below ``tol * max(norm)`` count as zero, with ``tol = max(64 eps_compute, eps_input)``: the
  epsilon of the precision the norms were computed in (float64, or float32 with ``precision="float32"``) and of
  the type the input is stored in (float32, bfloat16, ...). So rounding cannot turn a matrix with equal row
  norms (an orthogonal one, say) into a spurious +-1: stored in float32 or bfloat16, its row norms are equal
  only to within that type's epsilon (measured: at most 0.07 eps above the threshold), and it scores 0.

Factor form. Query/key weights are given per head in the ``nn.Linear`` layout, ``W_q, W_k`` of shape
``[..., H, d_head, d_model]``, so that ``q_h = W_q[h] x`` and the bilinear form of head ``h`` is
``M_h = W_q[h]^T W_k[h]`` (``d_model x d_model``, the paper's ``W_q^h W_k^h^T``). The layer matrix is
``M = sum_h M_h = A^T B`` with ``A, B`` the heads stacked into ``[H * d_head, d_model]``. With ``r`` the
inner dimension (``d_head``, or ``H * d_head`` for the sum) every quantity reduces to ``r x r`` Grams:

* ``||M||_F^2 = tr((A A^T)(B B^T))``,
* ``tr(M M) = tr((B A^T)(B A^T))``,
* ``||M[i, :]||^2 = a_i^T (B B^T) a_i`` and ``||M[:, j]||^2 = b_j^T (A A^T) b_j`` (``a_i``, ``b_j`` columns),

which costs ``O(r^2 d)`` time and ``O(r d + r^2)`` memory instead of ``O(r d^2)`` and ``O(d^2)``.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from ._checks import ArrayLike, check_factors, check_square, input_eps, to_caller_type, to_float64
from .conventions import CONVENTION_DESCRIPTIONS, CONVENTIONS, DEFAULT_NUM_STD  # noqa: F401 - public here too

Convention = Literal["paper", "raw"]
Method = Literal["auto", "factors", "matrix"]
Layout = Literal["linear", "transformer_lens"]

# The layouts of per-head query/key factors that factor_scores reads, and what each means.
LAYOUTS = {
    "linear": "[..., H, d_head, d_model], nn.Linear's (q = W_q[h] x)",
    "transformer_lens": "[..., H, d_model, d_head], TransformerLens' W_Q and W_K (q = x @ W_Q[h])",
}


class Scores(NamedTuple):
    """Symmetry and directionality of the same batch of matrices, each of shape ``[...]``."""

    symmetry: ArrayLike
    directionality: ArrayLike


def _check_convention(convention: str) -> None:
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown score convention {convention!r}; choose one of {CONVENTIONS}")


def _check_num_std(num_std: float) -> None:
    if not (isinstance(num_std, (int, float)) and num_std == num_std and abs(num_std) != float("inf")):
        raise ValueError(f"num_std must be a finite number, got {num_std!r}")


def _trace_of_square(m: torch.Tensor) -> torch.Tensor:
    """``tr(M M) = sum_ij M_ij M_ji`` for ``[..., d, d]`` (einsum avoids a strided elementwise product)."""
    return torch.einsum("...ij,...ji->...", m, m)


def _symmetry_from_traces(cross: torch.Tensor, total: torch.Tensor, convention: str) -> torch.Tensor:
    """``cross = tr(M M)``, ``total = ||M||_F^2``, both ``[...]``."""
    if bool((total == 0).any()):
        n_zero = int((total == 0).sum())
        raise ValueError(f"symmetry score is undefined for a zero matrix ({n_zero} of the matrices have norm 0)")
    s = cross / total
    return s if convention == "paper" else (1.0 + s) / 2.0


def excess_tolerance(compute_dtype: torch.dtype, source_eps: float = 0.0) -> float:
    """Relative size below which a norm excess is rounding: ``max(64 eps_compute, eps_input)``."""
    return max(64 * torch.finfo(compute_dtype).eps, source_eps)


def _excess_per_entry(norms: torch.Tensor, num_std: float, tol: float) -> torch.Tensor:
    """Excess of each of ``norms`` ``[..., n]`` over ``mean + num_std * std``, 0 where it is not above ``tol * max``;
    ``[..., n]``."""
    if norms.shape[-1] < 2:
        return torch.zeros_like(norms)
    threshold = norms.mean(-1, keepdim=True) + num_std * norms.std(-1, correction=1, keepdim=True)
    excess = norms - threshold
    tolerance = tol * norms.amax(-1, keepdim=True)
    return torch.where(excess > tolerance, excess, torch.zeros_like(excess))


def _norm_excess(norms: torch.Tensor, num_std: float, tol: float) -> torch.Tensor:
    """Summed excess of ``norms`` ``[..., n]`` over ``mean + num_std * std``, excesses below ``tol * max`` dropped;
    ``[...]``."""
    return _excess_per_entry(norms, num_std, tol).sum(-1)


def _directionality_from_norms(
    row_norms: torch.Tensor, col_norms: torch.Tensor, num_std: float, convention: str, tol: float
) -> torch.Tensor:
    rows = _norm_excess(row_norms, num_std, tol)
    cols = _norm_excess(col_norms, num_std, tol)
    total = rows + cols
    score = torch.where(total > 0, (rows - cols) / torch.where(total > 0, total, 1.0), torch.zeros_like(total))
    return score if convention == "paper" else -score


def symmetry_score(m: ArrayLike, *, convention: Convention = "paper") -> ArrayLike:
    """Symmetry score of ``m`` with shape ``[..., d, d]``; returns shape ``[...]``.

    ``(||M_s||^2 - ||M_n||^2) / ||M||^2`` in [-1, 1] (``convention="paper"``), or the authors' raw
    ``||M_s||^2 / ||M||^2`` in [0, 1] (``convention="raw"``). Raises ``ValueError`` for a zero matrix.
    """
    _check_convention(convention)
    m, as_torch = to_float64(m, "M")
    check_square(m, "M")
    total = (m * m).sum((-2, -1))
    cross = _trace_of_square(m)
    return to_caller_type(_symmetry_from_traces(cross, total, convention), as_torch)


def directionality_score(
    m: ArrayLike, *, num_std: float = DEFAULT_NUM_STD, convention: Convention = "paper"
) -> ArrayLike:
    """Directionality score of ``m`` with shape ``[..., d, d]``; returns shape ``[...]``.

    ``(R - C)/(R + C)`` with ``R`` (``C``) the summed excess of row (column) Euclidean norms over
    ``mean + num_std * std``; negative = column dominance. ``convention="raw"`` flips the sign (authors' code).
    """
    _check_convention(convention)
    _check_num_std(num_std)
    tol = excess_tolerance(torch.float64, input_eps(m))
    m, as_torch = to_float64(m, "M")
    check_square(m, "M")
    row_norms = torch.linalg.vector_norm(m, dim=-1)
    col_norms = torch.linalg.vector_norm(m, dim=-2)
    return to_caller_type(_directionality_from_norms(row_norms, col_norms, num_std, convention, tol), as_torch)


def row_column_excess(m: ArrayLike, *, num_std: float = DEFAULT_NUM_STD) -> tuple[ArrayLike, ArrayLike]:
    """The two ingredients of directionality for ``m`` ``[..., d, d]``: row excess ``R`` and column excess ``C``.

    ``R = sum_i max(r_i - tau_r, 0)`` with ``tau_r = mean(r) + num_std * std(r)`` over the row norms ``r``;
    ``C`` likewise over the column norms. Each of shape ``[...]``.
    """
    _check_num_std(num_std)
    tol = excess_tolerance(torch.float64, input_eps(m))
    m, as_torch = to_float64(m, "M")
    check_square(m, "M")
    rows = _norm_excess(torch.linalg.vector_norm(m, dim=-1), num_std, tol)
    cols = _norm_excess(torch.linalg.vector_norm(m, dim=-2), num_std, tol)
    return to_caller_type(rows, as_torch), to_caller_type(cols, as_torch)


def dominant_columns(m: ArrayLike, *, num_std: float = DEFAULT_NUM_STD) -> torch.Tensor:
    """Which columns of ``m`` ``[..., d, d]`` the directionality score counts as outlying: a bool tensor ``[..., d]``.

    Column ``j`` is dominant when ``c_j = ||M[:, j]|| > tau_c = mean(c) + num_std * std(c)`` by more than the
    rounding tolerance, exactly the columns whose excess makes up ``C`` in :func:`directionality_score`.
    """
    _check_num_std(num_std)
    tol = excess_tolerance(torch.float64, input_eps(m))
    m, _ = to_float64(m, "M")
    check_square(m, "M")
    return _excess_per_entry(torch.linalg.vector_norm(m, dim=-2), num_std, tol) > 0


def scores(m: ArrayLike, *, num_std: float = DEFAULT_NUM_STD, convention: Convention = "paper") -> Scores:
    """Both scores of ``m`` ``[..., d, d]``; see :func:`symmetry_score` and :func:`directionality_score`."""
    return Scores(
        symmetry_score(m, convention=convention),
        directionality_score(m, num_std=num_std, convention=convention),
    )


def _stack_heads(w: torch.Tensor) -> torch.Tensor:
    """``[..., H, d_head, d_model] -> [..., H * d_head, d_model]``."""
    if w.ndim < 3:
        raise ValueError(f"sum_heads=True needs a head axis: shape [..., H, d_head, d_model], got {tuple(w.shape)}")
    return w.reshape(*w.shape[:-3], w.shape[-3] * w.shape[-2], w.shape[-1])


def _unit_scaled(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``[..., r, d]`` times ``2^-e`` per matrix, ``e`` the binary exponent of its largest ``|entry|`` (which then
    lies in [1/2, 1)). The scores are invariant under scaling either factor, and a power of two changes no mantissa,
    so they come out as from ``x`` itself wherever its products would neither overflow nor underflow, and finite where
    they would (float32 weights times 1e9, or times 1e-12, from ``d_model`` in the tens). The factor is applied in two
    halves, each a power of two the dtype can hold."""
    _, exponent = torch.frexp(x.abs().amax((-2, -1), keepdim=True))
    half = exponent // 2
    two = torch.tensor(2.0, dtype=x.dtype, device=x.device)
    return x * two.pow(-half) * two.pow(half - exponent)


def _in_linear_layout(a: torch.Tensor, b: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``a``, ``b`` in the ``linear`` layout, read as ``layout`` (:data:`LAYOUTS`); per-head factors (a head axis:
    three axes or more) whose ``d_head`` would be wider than ``d_model`` are refused, in one line naming both."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {', '.join(map(repr, LAYOUTS))}")
    if layout == "transformer_lens":
        a, b = a.mT, b.mT
    d_head, d_model = a.shape[-2:]
    if a.ndim >= 3 and d_head > d_model:
        other = next(name for name in LAYOUTS if name != layout)
        raise ValueError(
            f"W_q of shape {tuple(a.shape if layout == 'linear' else a.mT.shape)} read as layout={layout!r} "
            f"{LAYOUTS[layout]} has d_head {d_head} wider than d_model {d_model}; "
            f"layout={other!r} is {LAYOUTS[other]}"
        )
    return a, b


def factor_scores(
    w_q: ArrayLike,
    w_k: ArrayLike,
    *,
    layout: Layout = "linear",
    sum_heads: bool = False,
    num_std: float = DEFAULT_NUM_STD,
    convention: Convention = "paper",
    method: Method = "auto",
    precision: Literal["float64", "float32"] = "float64",
    device: str | torch.device | None = None,
    source_eps: float | None = None,
) -> Scores:
    """Scores of ``M = W_q^T W_k`` from the factors, without forming ``M`` when that is cheaper.

    Args:
        w_q, w_k: ``[..., H, d_head, d_model]`` per-head weights in the ``nn.Linear`` layout (``q = W_q x``);
            any ``[..., r, d_model]`` works with ``sum_heads=False``.
        layout: how ``w_q`` and ``w_k`` are laid out (:data:`LAYOUTS`): ``"linear"`` as above, or
            ``"transformer_lens"``, TransformerLens' ``W_Q``/``W_K`` ``[..., H, d_model, d_head]``. Per-head factors
            (three axes or more) whose ``d_head`` the layout would make wider than ``d_model`` raise ``ValueError``
            naming both layouts: the other layout was meant. Two axes (``[r, d_model]``, stacked heads may be wider
            than ``d_model``) and ``d_head == d_model`` cannot be told apart, and are read as named.
        sum_heads: score the layer matrix ``sum_h W_q[h]^T W_k[h]`` (what the paper's tables report)
            instead of one matrix per head.
        method: ``"factors"`` uses the ``r x r`` Gram identities of the module docstring, ``"matrix"``
            forms ``M``, ``"auto"`` picks the factors when ``r < d_model``.
        precision: ``"float64"`` (default) or ``"float32"``, about 3x faster for ``d_model`` in the
            thousands, with scores accurate to about 1e-5 instead of 1e-12. Results are float64 either way. Each
            factor is first scaled by a power of two to a largest entry in [1/2, 1) (the scores do not change), so
            that neither precision overflows or underflows on weights of any scale; a result that is still not
            finite raises ``ValueError``.
        device: where the products run (``"cuda"``, ``"cpu"``, a ``torch.device``); default: where ``w_q`` is
            (numpy input: the CPU). Torch input gets its result on that device, numpy input as numpy.
        source_eps: epsilon of the type the weights were stored in, when ``w_q``/``w_k`` were converted already
            (default: read from their dtype); it sets the directionality's rounding tolerance (module docstring).

    Returns:
        :class:`Scores` of shape ``[..., H]`` (per head) or ``[...]`` (``sum_heads=True``).
    """
    _check_convention(convention)
    _check_num_std(num_std)
    if method not in ("auto", "factors", "matrix"):
        raise ValueError(f"unknown method {method!r}; choose 'auto', 'factors' or 'matrix'")
    if precision not in ("float64", "float32"):
        raise ValueError(f"unknown precision {precision!r}; choose 'float64' or 'float32'")
    dtype = torch.float64 if precision == "float64" else torch.float32
    tol = excess_tolerance(dtype, max(input_eps(w_q), input_eps(w_k)) if source_eps is None else source_eps)
    a, as_torch = to_float64(w_q, "W_q", dtype, device)
    b, _ = to_float64(w_k, "W_k", dtype, device)
    check_factors(a, b)
    a, b = _in_linear_layout(a, b, layout)
    if sum_heads:
        a, b = _stack_heads(a), _stack_heads(b)
    a, b = _unit_scaled(a), _unit_scaled(b)
    inner, d_model = a.shape[-2], a.shape[-1]
    if method == "matrix" or (method == "auto" and inner >= d_model):
        m = a.mT @ b
        sym = _symmetry_from_traces(_trace_of_square(m), (m * m).sum((-2, -1)), convention)
        rows, cols = torch.linalg.vector_norm(m, dim=-1), torch.linalg.vector_norm(m, dim=-2)
    else:
        gram_q = a @ a.mT  # [..., r, r]
        gram_k = b @ b.mT
        mixed = b @ a.mT  # B A^T
        sym = _symmetry_from_traces(_trace_of_square(mixed), (gram_q * gram_k).sum((-2, -1)), convention)
        rows = ((gram_k @ a) * a).sum(-2).clamp_min(0).sqrt()
        cols = ((gram_q @ b) * b).sum(-2).clamp_min(0).sqrt()
    direc = _directionality_from_norms(rows.double(), cols.double(), num_std, convention, tol)
    if not bool(torch.isfinite(sym).all() and torch.isfinite(direc).all()):
        raise ValueError(f"the scores are not finite: the {precision} products overflowed or underflowed")
    return Scores(to_caller_type(sym.double(), as_torch), to_caller_type(direc, as_torch))
