"""Missing extras name their install line; short ids work wherever ids are taken (issue 16)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentgym.cli import CLIError
from agentgym.cli import resolve_env_id as cli_resolve
from agentgym.eval import EvalError, evaluate
from agentgym.registration import UnknownEnvIdError, missing_extra_message, resolve_env_id
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


def test_resolve_env_id_is_the_one_place_a_name_becomes_an_id(tmp_path: Path) -> None:
    """Issue 40: the CLI, ``agentgym eval``, training configs, the TRL integration and the
    leaderboard all call :func:`resolve_env_id`. The forms they accepted between them: the id
    itself and the id without its namespace; nothing else (not the name without its version, not
    Gymnasium's ``module:id`` form, not another case). A refusal names close ids (difflib, ratio
    >= 0.6 against the full ids and the short ones) and ``agentgym list``."""
    assert resolve_env_id("agentgym/Bandit-v0") == "agentgym/Bandit-v0"
    assert resolve_env_id("Bandit-v0") == "agentgym/Bandit-v0"
    assert resolve_env_id("BanditHeldOut-v0") == "agentgym/BanditHeldOut-v0"
    # "Bandit" against the short "Bandit-v0": ratio 2*6/(6+9) = 0.8, the only one >= 0.6
    # ("BanditHeldOut-v0": 2*6/(6+16) = 0.55; the full "agentgym/Bandit-v0": 12/24 = 0.5).
    with pytest.raises(UnknownEnvIdError) as refused:
        resolve_env_id("Bandit")
    assert str(refused.value) == (
        "unknown environment id 'Bandit'; did you mean agentgym/Bandit-v0? "
        "(`agentgym list` shows them all)"
    )
    assert refused.value.name == "Bandit" and isinstance(refused.value, ValueError)
    # "agentgym:agentgym/Bandit-v0" against the full id: 2*18/(27+18) = 0.8, the best match.
    for name in ("agentgym:agentgym/Bandit-v0", "bandit-v0", "agentgym/Bandit-v9"):
        with pytest.raises(UnknownEnvIdError, match=r"; did you mean agentgym/Bandit-v0 or "):
            resolve_env_id(name)
    # "Chess-v0" is near nothing: no suggestion, only the list.
    with pytest.raises(UnknownEnvIdError, match=r"^unknown environment id 'Chess-v0' \(`agentgym"):
        resolve_env_id("Chess-v0")
    with pytest.raises(UnknownEnvIdError, match="an id is a string"):
        resolve_env_id(7)  # type: ignore[arg-type]
    # The callers: each resolves the short form and words a refusal with the same hint.
    assert cli_resolve("Bandit-v0") == "agentgym/Bandit-v0"
    with pytest.raises(CLIError, match=r"'Bandit'; did you mean agentgym/Bandit-v0\?"):
        cli_resolve("Bandit")
    assert load_config(None, ["rollout.env_id=Bandit-v0"]).rollout.env_id == "agentgym/Bandit-v0"
    with pytest.raises(ValueError, match=r"rollout.env_id: unknown id 'Bandit'; did you mean "):
        load_config(None, ["rollout.env_id=Bandit"])
    with pytest.raises(EvalError, match=r"unknown environment id 'Bandit'; did you mean "):
        evaluate(["Bandit"], "random", episodes=1, out=tmp_path / "x.json", progress=False)
    assert not (tmp_path / "x.json").exists()
    bundle = evaluate(["Bandit-v0"], "random", episodes=1, out=tmp_path / "x.json", progress=False)
    assert [run["env_id"] for run in bundle["runs"]] == ["agentgym/Bandit-v0"]
