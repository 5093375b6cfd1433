"""Benchmark: per-head scores from the factors versus from the formed d x d matrices, in one run.

    .venv/bin/python benchmarks/factor_scores.py [--d-model 4096 --heads 32 --d-head 128 --repeats 3]

Prints the wall time of each method, their ratio, and the largest difference between their scores.
Defaults are one attention layer shaped like a 7B LLaMA (d_model 4096, 32 heads of 128).
"""

import argparse
import time

import torch

import attnstruct as at


def timed(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--d-head", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    shape = (args.heads, args.d_head, args.d_model)
    w_q = torch.randn(*shape, generator=gen, dtype=torch.float64)
    w_k = torch.randn(*shape, generator=gen, dtype=torch.float64)

    def by_factors():
        return at.factor_scores(w_q, w_k, method="factors")

    def by_matrices():  # one head at a time, so memory stays at one d x d matrix
        per_head = [at.scores(w_q[h].T @ w_k[h]) for h in range(args.heads)]
        return at.Scores(torch.stack([s.symmetry for s in per_head]), torch.stack([s.directionality for s in per_head]))

    t_f, s_f = timed(by_factors, args.repeats)
    t_m, s_m = timed(by_matrices, args.repeats)
    diff = max(
        float((s_f.symmetry - s_m.symmetry).abs().max()), float((s_f.directionality - s_m.directionality).abs().max())
    )
    layer = f"d_model {args.d_model}, {args.heads} heads of {args.d_head}"
    print(f"layer: {layer}; best of {args.repeats}; torch threads {torch.get_num_threads()}")
    print(f"factors  {t_f:8.3f} s")
    print(f"matrices {t_m:8.3f} s")
    print(f"ratio matrices / factors: {t_m / t_f:.1f}x; largest score difference {diff:.2e}")


if __name__ == "__main__":
    main()
