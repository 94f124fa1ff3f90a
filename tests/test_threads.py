"""The OpenMP wait policy set before torch loads (agentgym.threads, baselines/__init__.py).

Each case runs in a fresh interpreter: the policy only counts before the process's first
``import torch``, and this test process has usually loaded torch already. No timings here: the
speed the policy buys is measured by ``benchmarks/bench_threads.py``.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers import ROOT, run_python

REPORT = (
    "import json, os, sys, warnings\n"
    "warnings.simplefilter('always')\n"
    "with warnings.catch_warnings(record=True) as seen:\n"
    "    {code}\n"
    "print(json.dumps({{'policy': os.environ.get('OMP_WAIT_POLICY'),"
    " 'torch': 'torch' in sys.modules,"
    " 'warnings': [w.category.__name__ for w in seen]}}))\n"
)


def _child(code: str, policy: str | None = None) -> dict:
    """Run ``code`` in a fresh interpreter; the policy, whether torch loaded, warnings seen."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = run_python("-c", REPORT.format(code=code), env=env, cwd=ROOT, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_agentgym_does_not_load_torch_nor_set_the_policy() -> None:
    got = _child("import agentgym, agentgym.threads, agentgym.cli, agentgym.agents")
    assert got == {"policy": None, "torch": False, "warnings": []}


def test_import_baselines_sets_passive_before_torch() -> None:
    got = _child("import baselines")
    assert got == {"policy": "PASSIVE", "torch": False, "warnings": []}


@pytest.mark.parametrize("policy", ["ACTIVE", "passive", ""])
def test_a_users_policy_is_kept(policy: str) -> None:
    # libgomp rejects an empty value with a message and keeps its default: still the user's call.
    assert _child("import baselines", policy)["policy"] == policy


def test_entry_points_set_passive_before_torch() -> None:
    # baselines.train imports torch: the package's __init__ runs first and sets the policy.
    got = _child("import baselines.train")
    assert got["policy"] == "PASSIVE" and got["torch"] and got["warnings"] == []
    # baselines.llm.threads (agentgym eval --threads, the hf: agent) sets it where it loads torch.
    got = _child("from baselines.llm.threads import set_torch_threads; set_torch_threads(1)")
    assert got["policy"] == "PASSIVE" and got["torch"] and got["warnings"] == []


def test_torch_loaded_first_warns_once_and_changes_nothing() -> None:
    code = (
        "import torch\n    import baselines\n"
        "    from agentgym.threads import set_omp_wait_policy; set_omp_wait_policy()"
    )
    got = _child(code)
    assert got == {"policy": None, "torch": True, "warnings": ["OmpWaitPolicyWarning"]}
    # A policy the user chose is no cause for a warning, whenever torch loaded.
    assert _child(code, "ACTIVE")["warnings"] == []
