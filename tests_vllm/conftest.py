"""Shared fixtures of the vLLM tests: the embedded SmolLM2 policy and ONE vLLM engine per session
(start-up costs 30-90 s on 2 cores). Run by .ci/vllm_tests.sh in the .venv-vllm venv."""

from __future__ import annotations

import os

# The entry points' OpenMP wait policy (agentgym.threads), before anything here loads torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def policy():
    """(model, tokenizer): SmolLM2-135M-Instruct, float32 on CPU."""
    from baselines.llm.policy import load_policy

    return load_policy("embedded", device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def engine(policy):
    from baselines.llm.engines import VLLMEngine

    model, tokenizer = policy
    eng = VLLMEngine(model, tokenizer, max_model_len=2048)
    yield eng
    eng.close()
