"""Helpers shared by the test modules (and by tests_vllm/ and benchmarks/).

Only the standard library and agentgym at import time: tests_vllm/ runs in a venv without the
test extras, and what needs torch or transformers is imported where it is used.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: The repository root (tests/..).
ROOT = Path(__file__).resolve().parent.parent


class FakeEngine:
    """The rest of the rollout-engine protocol (:class:`baselines.llm.engines.RolloutEngine`) for a
    test's scripted engine, which defines ``name``, ``provides_logprobs`` and ``generate``: it
    samples from a copy that the trainer syncs after each update (as vLLM), holds nothing."""

    samples_from_copy = True

    def sync_weights(self, model: Any) -> float:
        return 0.0

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


def run_python(
    *args: str, timeout: float, stdin: str | None = None, **options: Any
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with this interpreter in a subprocess, its output captured as text;
    ``options`` are :func:`subprocess.run`'s (``cwd``, ``env``, ``encoding``, ``check``)."""
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        **options,
    )


def quiet_eval(env_id: str, agent: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`agentgym.eval.evaluate` of one environment, without the progress bar."""
    from agentgym.eval import evaluate

    return evaluate([env_id], agent, progress=False, **kwargs)


def first_prompt_ids(tokenizer: Any, env_ids_seeds: Iterable[tuple[str, Iterable[int]]]) -> list:
    """The token ids of the first prompt (system: the instructions, user: the first observation,
    then the think prefix) of each ``(env_id, seeds)`` episode, in order."""
    import gymnasium

    import agentgym  # noqa: F401  (registers the ids)
    from baselines.llm.prompts import prompt_token_ids

    out = []
    for env_id, seeds in env_ids_seeds:
        env = gymnasium.make(env_id)
        for seed in seeds:
            obs, info = env.reset(seed=seed)
            messages = [
                {"role": "system", "content": info["instructions"]},
                {"role": "user", "content": obs},
            ]
            out.append(prompt_token_ids(tokenizer, messages, True))
        env.close()
    return out


def assert_records_this_code(recorded: dict[str, Any]) -> None:
    """``recorded`` (a run's provenance) names the code these tests import: the commit of its git
    checkout (``git rev-parse HEAD``, asked here) or, for an installed package, its version; the
    installed torch and transformers."""
    import importlib.metadata

    import agentgym

    tree = Path(agentgym.__file__).resolve().parents[1]
    top = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if top.returncode == 0 and Path(top.stdout.strip()).resolve() == tree:
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        assert (recorded["source"], recorded["commit"]) == ("git", head.stdout.strip())
        assert isinstance(recorded["dirty"], bool)
        assert recorded["dirty"] == bool(recorded["dirty_paths"]) == bool(recorded["diff_sha256"])
    else:
        assert (recorded["source"], recorded["commit"], recorded["dirty"]) == (
            "installed",
            None,
            None,
        )
    assert recorded["agentgym_version"] == agentgym.__version__
    for name in ("torch", "transformers"):
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = None
        assert recorded["packages"][name] == version


def git(root: Path, *args: str) -> str:
    """``git args`` in ``root`` (stdout, stripped), with a fixed author and no configuration of
    the machine or the user read."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1"},
    ).stdout.strip()


def git_repo(root: Path) -> Path:
    """A new git work tree at ``root`` with one commit: ``baselines/trainer.py`` (``lr = 1``),
    ``agentgym/envs/bandit.py`` (``arms = 2``), ``agentgym/envs/sokoban.py`` (``walls = 1``) and
    ``docs/report.md``."""
    files = {
        "baselines/trainer.py": "lr = 1\n",
        "agentgym/envs/bandit.py": "arms = 2\n",
        "agentgym/envs/sokoban.py": "walls = 1\n",
        "docs/report.md": "# report\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    return root


def cpu_grpo_config(output_dir: str | Path, **settings: Any) -> Any:
    """TRL's ``GRPOConfig`` for a short run on the CPU (no reports, no saves, a log line a step,
    seed 0, 16 completions a device batch), ``settings`` on top; imports TRL."""
    from trl import GRPOConfig

    fixed = {"use_cpu": True, "report_to": [], "save_strategy": "no", "logging_steps": 1}
    return GRPOConfig(
        output_dir=str(output_dir),
        **{**fixed, "seed": 0, "per_device_train_batch_size": 16, **settings},
    )


def alive(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` that still run (a zombie counts as gone: it holds no resources)."""
    import psutil

    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out
