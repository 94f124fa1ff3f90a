"""``agentgym eval`` never gives a silent result: reuse is announced, an all-errored run fails.

Issue 16: a rerun after fixing an agent printed the old all-errored table (the finished bundle was
reused without a word), and a run where every episode errored exited 0.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from agentgym.agents import AgentRequest, make_agent, request_json
from agentgym.cli import main
from baselines.llm.threads import resolve_threads, usable_cpus


def _eval(tmp_path: Path, agent: str, *extra: str) -> list[str]:
    return [
        "eval",
        "--env",
        "Bandit-v0",
        "--agent",
        agent,
        "--episodes",
        "2",
        "--out",
        str(tmp_path / "out.json"),
        "--no-progress",
        *extra,
    ]


def test_missing_program_exits_1_and_prints_the_error(tmp_path: Path, capsys) -> None:
    assert main(_eval(tmp_path, "cmd:agentgym-no-such-program-xyz")) == 1
    err = capsys.readouterr().err
    assert "every episode (2) ended in an error" in err
    assert "cannot start 'agentgym-no-such-program-xyz'" in err
    assert "No such file or directory" in err


def test_raising_python_agent_exits_1_with_its_traceback(tmp_path: Path, capsys) -> None:
    agent = tmp_path / "broken.py"
    agent.write_text(
        textwrap.dedent(
            """
            def act(request):
                return helper(request)

            def helper(request):
                raise RuntimeError("the agent's own bug")
            """
        )
    )
    assert main(_eval(tmp_path, f"{agent}:act")) == 1
    captured = capsys.readouterr()
    assert "no description: give one with --agent-description or a docstring" in captured.out
    # In full: the message and the user's frames down to the raise.
    assert "RuntimeError: the agent's own bug" in captured.err
    assert "in helper" in captured.err and "Traceback" in captured.err


def test_rerun_says_it_reuses_the_finished_bundle_and_how_to_redo(tmp_path: Path, capsys) -> None:
    assert main(_eval(tmp_path, "cmd:agentgym-no-such-program-xyz")) == 1
    capsys.readouterr()
    assert main(_eval(tmp_path, "cmd:agentgym-no-such-program-xyz")) == 1
    err = capsys.readouterr().err
    assert f"reusing 2 finished episode(s) from {tmp_path / 'out.json'}" in err
    assert "--overwrite" in err
    # --overwrite runs them again: no reuse message.
    assert main(_eval(tmp_path, "random", "--overwrite")) == 0
    assert "reusing" not in capsys.readouterr().err


def test_some_errors_are_reported_but_not_fatal(tmp_path: Path, capsys) -> None:
    agent = tmp_path / "half.py"
    agent.write_text(
        textwrap.dedent(
            '''
            def act(request):
                """Fails on odd seeds."""
                if request["seed"] % 2:
                    raise ValueError("odd")
                return "<think>x</think><answer>" + request["valid_actions"][0] + "</answer>"
            '''
        )
    )
    assert main(_eval(tmp_path, f"{agent}:act")) == 0
    captured = capsys.readouterr()
    assert "(Fails on odd seeds.)" in captured.out
    assert "1 episode(s) ended in an error" in captured.err


def test_request_reads_like_a_plain_dict() -> None:
    req = AgentRequest(
        env_id="agentgym/Bandit-v0",
        episode=0,
        seed=3,
        turn=1,
        observation="obs",
        info={"valid_actions": ["A", "B"]},
        last_reward=None,
        messages=[],
        instructions="rules",
        action_format="raw",
    )
    assert req["observation"] == "obs" and req["seed"] == 3
    assert req["valid_actions"] == ["A", "B"]  # a key of the JSON form, from info
    assert req.get("nope", 7) == 7
    with pytest.raises(KeyError, match="fields: .*observation"):
        req["nope"]
    # A read-only mapping over its fields (``env`` left out) and the JSON form's keys from info.
    assert isinstance(req, Mapping)
    assert "valid_actions" in req and "observation" in req
    assert "nope" not in req and "env" not in req and 0 not in req
    assert req.get("nope", 1) == 1 and req.get("turn") == 1
    assert (
        list(req.keys())
        == list(req)
        == [
            "env_id",
            "episode",
            "seed",
            "turn",
            "observation",
            "info",
            "last_reward",
            "messages",
            "instructions",
            "action_format",
            "valid_actions",
            "actions_left",
            "max_actions_per_turn",
            "last_action_valid",
            "invalid_reason",
        ]
    )
    assert dict(req) == {
        "env_id": "agentgym/Bandit-v0",
        "episode": 0,
        "seed": 3,
        "turn": 1,
        "observation": "obs",
        "info": {"valid_actions": ["A", "B"]},
        "last_reward": None,
        "messages": [],
        "instructions": "rules",
        "action_format": "raw",
        "valid_actions": ["A", "B"],
        "actions_left": None,
        "max_actions_per_turn": None,
        "last_action_valid": None,
        "invalid_reason": None,
    }
    assert len(req) == 15 and list(req.values()) == [v for _, v in req.items()]
    # Every key of the cmd: JSON form reads the same here.
    assert set(request_json(req)) | {"info", "messages"} == set(req)
    assert all(req[k] == v for k, v in request_json(req).items())
    assert req.observation == "obs"  # still a dataclass: attributes, field-wise equality
    assert req == replace(req) and req != replace(req, seed=4)
    # A function may also answer {"action": text}.
    agent = make_agent(f"{__name__}:_dict_answer")
    assert agent.act([req]) == ["A"]


def _dict_answer(request):
    return {"action": request["valid_actions"][0]}


def test_threads_default_is_half_the_usable_cpus() -> None:
    assert resolve_threads(3) == 3
    assert resolve_threads(0) == max(1, usable_cpus() // 2)
    with pytest.raises(ValueError, match="whole number >= 0"):
        resolve_threads(-1)


def test_eval_threads_flag(tmp_path: Path, capsys) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        assert main(_eval(tmp_path, "random", "--threads", "1")) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert main(_eval(tmp_path, "random", "--threads", "-1", "--overwrite")) == 2
    assert "--threads must be >= 0" in capsys.readouterr().err


class DocumentedBatchAgent:
    """Pulls the first valid action for every request."""

    def act(self, requests):
        return [f"<think>t</think><answer>{r['valid_actions'][0]}</answer>" for r in requests]


def test_a_class_agent_is_described_by_its_docstring() -> None:
    """A duck-typed agent object (``act(requests)``) without a ``description`` attribute is
    described by the first line of its class's docstring, as a function agent is."""
    from agentgym.agents import make_agent

    agent = make_agent("tests.test_eval_messages:DocumentedBatchAgent")
    assert agent.description == "Pulls the first valid action for every request."


def test_progress_into_a_log_is_not_one_frame_per_episode(tmp_path):
    # stderr is a pipe here, as in a CI log: tqdm drew a frame every 0.1 s (one per episode of
    # an hf: agent; a 200-episode eval was one 30 KB line); now at most one a minute, plus the
    # first and the last. The agent takes >= 20 ms an episode, so 200 episodes last >= 4 s: 40+
    # frames at tqdm's default rate.
    import subprocess
    import sys

    agent = tmp_path / "slow.py"
    agent.write_text(
        "import time\n"
        "def act(request):\n"
        "    time.sleep(0.02)\n"
        "    return request['valid_actions'][0]\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "agentgym", "eval", "--agent", f"{agent}:act", "--env",
         "Bandit-v0", "--episodes", "200", "--out", str(tmp_path / "b.json")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    frames = out.stderr.count("/200 [")  # one per drawn frame
    assert frames < 10, frames
