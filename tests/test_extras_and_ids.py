"""Missing extras name their install line; short ids work wherever ids are taken (issue 16)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentgym.registration import missing_extra_message
from baselines.config import load_config

REPO = Path(__file__).resolve().parent.parent


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_webshop_text_runs_without_selenium_and_the_browser_names_its_extra() -> None:
    # sys.modules["selenium"] = None makes every `import selenium` fail as if it were not installed.
    done = _run(
        """
        import sys
        sys.modules["selenium"] = None
        import gymnasium, agentgym
        env = gymnasium.make("agentgym/WebShopText-v0", num_products=50)
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("<think>x</think><answer>search[red shirt]</answer>")
        env.close()
        print("text ok", info["action_is_valid"])
        try:
            gymnasium.make("agentgym/WebShop-v0")
        except ModuleNotFoundError as err:
            print("browser:", err)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "text ok True" in done.stdout
    assert (
        "browser: WebShop's browser back end needs the package 'selenium': pip install "
        "'agentgym[web]'" in done.stdout
    )


def test_a_missing_package_names_the_extra_that_installs_it() -> None:
    err = ModuleNotFoundError("No module named 'flask'", name="flask")
    assert missing_extra_message("agentgym/WebShopText-v0", err) == (
        "agentgym/WebShopText-v0 needs the package 'flask': pip install 'agentgym[web]'"
    )
    err = ModuleNotFoundError("No module named 'reasoning_gym.x'", name="reasoning_gym.x")
    assert "pip install 'agentgym[math]'" in missing_extra_message("agentgym/Math-v0", err)
    done = _run(
        """
        import sys
        sys.modules["flask"] = None
        import gymnasium, agentgym
        try:
            gymnasium.make("agentgym/WebShopText-v0")
        except ModuleNotFoundError as err:
            print(err)
        """
    )
    assert "needs the package 'flask': pip install 'agentgym[web]'" in done.stdout, done.stderr


def test_short_ids_in_configs_and_baselines_evaluate(tmp_path: Path) -> None:
    assert load_config(None, ["rollout.env_id=Sokoban-v0"]).rollout.env_id == "agentgym/Sokoban-v0"
    with pytest.raises(ValueError, match="rollout.env_id: unknown id 'Nope-v0'"):
        load_config(None, ["rollout.env_id=Nope-v0"])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "baselines.evaluate",
            "--checkpoint",
            "tiny",
            "--env",
            "Bandit-v0",
            "--episodes",
            "2",
            "--max-new-tokens",
            "2",
            "--threads",
            "1",
            "--out",
            str(tmp_path / "eval.json"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # baselines.evaluate writes a leaderboard bundle and prints each environment's summary.
    assert json.loads(done.stdout)["summary"]["agentgym/Bandit-v0"]["episodes"] == 2
    bad = subprocess.run(
        [sys.executable, "-m", "baselines.evaluate", "--env", "Sokoban-v9", "--episodes", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "did you mean agentgym/Sokoban-v0" in bad.stderr
