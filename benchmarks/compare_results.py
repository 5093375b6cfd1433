"""Compare the datasets of two ``make reproduce`` runs (before and after a change), variable by variable.

    .venv/bin/python benchmarks/compare_results.py BEFORE/results AFTER/results [--expect FILE:VARIABLE ...]

Every ``*.nc`` under BEFORE (run folders included) is matched with the same path under AFTER. For each data
variable the values are compared bit for bit (NaN equal to NaN); a difference is reported with its largest
absolute and relative size. Coordinates are compared the same way, and variables or coordinates that only one
side has are listed. Attributes (provenance, creation times) are not compared.

Exit status 0 when every data variable is identical except those named with ``--expect`` (a change the
comparison is meant to show, e.g. ``07_vision.nc:train_loss``), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import xarray as xr


def _difference(a: xr.DataArray, b: xr.DataArray) -> str | None:
    """None when identical (dims, shape, values bit for bit with NaN == NaN), else what differs."""
    if a.dims != b.dims or a.shape != b.shape:
        return f"dims {a.dims}{a.shape} against {b.dims}{b.shape}"
    x, y = a.values, b.values
    if x.dtype.kind in "fc" and y.dtype.kind in "fc":
        if np.array_equal(x, y, equal_nan=True):
            return None
        nan_mismatch = np.isnan(x) != np.isnan(y)
        if nan_mismatch.any():
            return f"NaN at {int(nan_mismatch.sum())} other places"
        delta = np.abs(x - y)
        scale = np.maximum(np.abs(x), np.abs(y))
        relative = np.where(scale > 0, delta / np.where(scale > 0, scale, 1), 0.0)
        return f"max |diff| {np.nanmax(delta):.3g}, max relative {np.nanmax(relative):.3g}"
    return None if np.array_equal(x, y) else "values differ"


def compare_file(before: Path, after: Path) -> list[tuple[str, str, str]]:
    """Rows (kind, name, status) for one pair of datasets; status ``identical`` or what differs."""
    with xr.open_dataset(before, engine="h5netcdf") as a, xr.open_dataset(after, engine="h5netcdf") as b:
        a, b = a.load(), b.load()
    rows = []
    for kind, left, right in (("variable", a.data_vars, b.data_vars), ("coordinate", a.coords, b.coords)):
        for name in sorted(set(left) | set(right), key=str):
            if name not in right:
                rows.append((kind, str(name), "only before"))
            elif name not in left:
                rows.append((kind, str(name), "only after"))
            else:
                rows.append((kind, str(name), _difference(left[name], right[name]) or "identical"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="results folder of the run before the change")
    parser.add_argument("after", type=Path, help="results folder of the run after the change")
    parser.add_argument("--expect", nargs="*", default=[], metavar="FILE:VARIABLE", help="differences meant")
    args = parser.parse_args(argv)
    files = sorted(p.relative_to(args.before) for p in args.before.rglob("*.nc"))
    if not files:
        print(f"no .nc files under {args.before}", file=sys.stderr)
        return 2
    expected = set(args.expect)
    unexpected, identical_files = [], 0
    for relative in files:
        after = args.after / relative
        if not after.is_file():
            print(f"{relative}: missing after the change")
            unexpected.append(f"{relative}")
            continue
        rows = compare_file(args.before / relative, after)
        changed = [row for row in rows if row[2] != "identical"]
        if not changed:
            identical_files += 1
            print(f"{relative}: identical ({sum(r[0] == 'variable' for r in rows)} data variables)")
            continue
        print(f"{relative}:")
        for kind, name, status in changed:
            key = f"{relative.name}:{name}"
            meant = key in expected or f"{relative}:{name}" in expected
            note = " (expected)" if meant else ""
            print(f"  {kind} {name}: {status}{note}")
            if kind == "variable" and not meant and status != "only after":
                unexpected.append(key)
    print(
        f"\n{len(files)} datasets: {identical_files} identical; "
        + (f"unexpected differences in {', '.join(unexpected)}" if unexpected else "no unexpected difference")
    )
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
