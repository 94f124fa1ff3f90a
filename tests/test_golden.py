"""Golden seeds: the pinned oracle episodes of tests/golden/ come back exactly, in any process.

The files are written by ``python -m tests.golden_update`` (see its docstring for the format). If a
test here fails after a change that alters episodes, the change must bump the environment's
version (DESIGN.md) before the files are regenerated.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import agentgym
from tests.golden_update import GOLDEN_DIR, SEEDS, dumps, golden_path, record
from tests.helpers import ROOT, run_python

ENV_IDS = list(agentgym.registered_envs())


def _params() -> list[Any]:
    return [pytest.param(env_id, id=env_id) for env_id in ENV_IDS]


def _load(env_id: str) -> dict[str, Any]:
    path = golden_path(env_id)
    if not path.exists():
        pytest.fail(f"{path} is missing: run `python -m tests.golden_update {env_id}`")
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("env_id", _params())
def test_current_code_reproduces_golden_file_exactly(env_id: str) -> None:
    golden = _load(env_id)
    current = record(env_id)
    # Compare the data first (a readable diff), then the text byte for byte.
    assert current == golden
    assert dumps(current) == golden_path(env_id).read_text(encoding="utf-8")


@pytest.mark.parametrize("env_id", _params())
def test_golden_file_is_well_formed(env_id: str) -> None:
    golden = _load(env_id)
    assert golden["env_id"] == env_id
    assert [episode["seed"] for episode in golden["episodes"]] == list(SEEDS)
    for episode in golden["episodes"]:
        turns = episode["turns"]
        assert turns, "every episode has at least one turn"
        # Only the last turn ends the episode.
        assert not any(t["terminated"] or t["truncated"] for t in turns[:-1])
        assert turns[-1]["terminated"] or turns[-1]["truncated"]
        assert episode["return"] == sum(t["reward"] for t in turns)
        assert episode["success"] == turns[-1]["success"]
        # The oracle writes well-formed turns of recognised actions.
        if golden["policy"] == "oracle":
            assert all(t["action_is_valid"] for t in turns)


def test_no_stale_golden_files() -> None:
    """Every golden file belongs to a registered id (a removed or renamed id leaves none behind)."""
    expected = {golden_path(env_id).name for env_id in ENV_IDS}
    stale = sorted(p.name for p in GOLDEN_DIR.glob("*.json") if p.name not in expected)
    assert stale == []


def test_replay_in_fresh_process_gives_pinned_episodes() -> None:
    """Replaying the pinned actions in a new Python process (other hash seed) gives the same
    observations, rewards, terminated/truncated flags and success, for every golden file."""
    available = ENV_IDS
    env = {**os.environ, "PYTHONHASHSEED": "1234"}
    args = ["-m", "tests.golden_update", "--replay", *available]
    result = run_python(*args, cwd=ROOT, env=env, encoding="utf-8", timeout=300)
    assert result.returncode == 0, result.stderr
    replayed = json.loads(result.stdout)
    assert sorted(replayed) == sorted(available)
    for env_id in available:
        golden = _load(env_id)
        for pinned, got in zip(golden["episodes"], replayed[env_id], strict=True):
            turns = pinned["turns"]
            assert got["seed"] == pinned["seed"]
            assert got["observation"] == pinned["observation"], (env_id, pinned["seed"])
            assert got["observations"] == [t["observation"] for t in turns], (env_id, got["seed"])
            assert got["rewards"] == [t["reward"] for t in turns], (env_id, got["seed"])
            assert got["terminated"] == [t["terminated"] for t in turns]
            assert got["truncated"] == [t["truncated"] for t in turns]
            assert got["success"] == [t["success"] for t in turns]


def test_bandit_golden_by_hand() -> None:
    """Hand-read facts of the Bandit file: the oracle pulls the risky arm, which pays 1 or 0."""
    golden = _load("agentgym/Bandit-v0")
    assert golden["policy"] == "oracle"
    risky_names = {"Explorer", "Gambler", "Adventurer", "Treasure Hunter", "Daredevil", "Stuntman"}
    for episode in golden["episodes"]:
        (turn,) = episode["turns"]
        (pulled,) = turn["executed_actions"]
        assert pulled in risky_names
        assert turn["action"] == f"<think>oracle</think><answer>{pulled}</answer>"
        assert turn["reward"] in (0.0, 1.0)
        assert turn["terminated"] and not turn["truncated"] and turn["success"]
    # Seed 0: arms listed as (Nurse, Stuntman), and the risky arm paid.
    first = golden["episodes"][0]
    assert first["observation"] == "Arm 1: Nurse\nArm 2: Stuntman"
    assert first["turns"][0]["observation"].endswith("You pulled Stuntman and received 1.")
