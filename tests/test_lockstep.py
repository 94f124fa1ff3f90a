"""The one lock-step episode loop (agentgym.lockstep): what ends an episode, what is recorded, and
that eval and the trainer both play in it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym import lockstep
from agentgym.agents import RandomAgent
from agentgym.eval import evaluate
from agentgym.lockstep import (
    END_EPISODE,
    MAX_STEP_THREADS,
    Action,
    LocalEnvs,
    declares_io_bound,
    play_lockstep,
)

FROZEN = "agentgym/FrozenLake-v0"
LEFT = "<think>go</think><answer>Left</answer>"


class _BrokenStep(gym.Wrapper):
    """A real FrozenLake whose second step raises (an env that fails mid-episode)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps == 2:
            raise RuntimeError("socket closed")
        return self.env.step(action)


def _by_hand(seed: int, actions: list[str]) -> list[tuple[Any, ...]]:
    """Step a fresh env directly (the independent reference for what the loop records)."""
    env = gym.make(FROZEN)
    env.reset(seed=seed)
    out = [env.step(a) for a in actions]
    env.close()
    return out


def test_each_ending_concerns_only_its_own_episode() -> None:
    """Episode 0 (seed 6: Left, Left reaches the goal, found by stepping it) ends terminated on
    turn 2; 1 gets END_EPISODE on turn 2; 2's policy item is an error on turn 1; 3's env raises on
    its second step. Seeds 0 and 3 survive two Lefts."""
    envs = [gym.make(FROZEN) for _ in range(3)] + [_BrokenStep(gym.make(FROZEN))]
    calls: list[list[tuple[int, int]]] = []

    def policy(live: list[lockstep.LiveEpisode]) -> list[Any]:
        calls.append([(e.index, e.turn) for e in live])
        out: list[Any] = []
        for e in live:
            if e.index == 1 and e.turn == 2:
                out.append(END_EPISODE)
            elif e.index == 2:
                out.append(ValueError("no answer"))
            else:
                out.append(LEFT)
        return out

    seeds = [6, 0, 2, 3]
    played = play_lockstep(LocalEnvs(envs, catch=True), seeds, policy, catch_errors=True)
    # Turn by turn, by hand: who was still live when the policy was asked.
    assert calls[0] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    assert calls[1] == [(0, 2), (1, 2), (3, 2)]
    assert len(calls) == 2
    e0, e1, e2, e3 = played
    assert [s.reward for s in e0.steps] == [0.0, 1.0] and e0.terminated and not e0.truncated
    assert e0.steps[-1].info["success"] and e0.error is None
    assert [e.seed for e in played] == seeds
    assert len(e1.steps) == 1 and e1.truncated and not e1.terminated and e1.error is None
    assert e2.steps == [] and e2.error == "no answer" and e2.done
    assert len(e3.steps) == 1 and e3.error == "env step failed: RuntimeError: socket closed"
    # What the loop recorded is what the env gives when stepped directly with the same actions.
    for episode in (e0, e1):
        actions = [s.action for s in episode.steps]
        for step, direct in zip(episode.steps, _by_hand(episode.seed, actions), strict=True):
            assert (step.reward, step.terminated, step.truncated) == (
                pytest.approx(float(direct[1])),
                direct[2],
                direct[3],
            )
            assert step.info["action_is_valid"] == direct[4]["action_is_valid"]
    # The chat holds each action as the assistant's message, after the reset observation.
    messages = e1.chat.messages()  # type: ignore[union-attr]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == LEFT
    for env in envs:
        env.close()


def test_without_catch_errors_a_failure_is_raised() -> None:
    envs = [gym.make(FROZEN), _BrokenStep(gym.make(FROZEN))]  # seed 2 survives one Left
    with pytest.raises(RuntimeError, match="socket closed"):
        play_lockstep(LocalEnvs(envs), [0, 2], lambda live: [LEFT] * len(live))
    with pytest.raises(ValueError, match="returned 1 actions for 2"):
        play_lockstep(LocalEnvs(envs), [0, 1], lambda live: [LEFT])
    with pytest.raises(ValueError, match="returned a int, not a str or an Action of text"):
        play_lockstep(LocalEnvs(envs), [0, 1], lambda live: [1] * len(live))
    with pytest.raises(ValueError, match="need 3 environments, got 2"):
        play_lockstep(LocalEnvs(envs), [0, 1, 2], lambda live: [LEFT] * len(live))
    for env in envs:
        env.close()


def test_an_actions_sample_is_kept_on_its_step() -> None:
    """A policy may return an Action (text and an opaque payload) or plain text; the loop steps
    the env with the text and keeps the payload on that turn's Step (None for plain text)."""
    envs = [gym.make(FROZEN) for _ in range(2)]

    def policy(live: list[lockstep.LiveEpisode]) -> list[Any]:
        return [Action(LEFT, ("sampled", e.turn)) if e.index == 0 else LEFT for e in live]

    e0, e1 = play_lockstep(LocalEnvs(envs), [0, 3], policy)
    assert len(e0.steps) >= 2 and len(e1.steps) >= 2  # seeds 0 and 3 survive two Lefts
    assert [s.action for s in e0.steps + e1.steps] == [LEFT] * (len(e0.steps) + len(e1.steps))
    assert [s.sample for s in e0.steps] == [("sampled", t + 1) for t in range(len(e0.steps))]
    assert all(s.sample is None for s in e1.steps)
    # The same actions as plain text give the same steps, payload aside.
    plain = play_lockstep(LocalEnvs(envs), [0], lambda live: [LEFT] * len(live))[0]
    assert [(s.reward, s.info) for s in plain.steps] == [(s.reward, s.info) for s in e0.steps]
    with pytest.raises(ValueError, match="returned a Action whose text is a int, not a str"):
        play_lockstep(LocalEnvs(envs), [0], lambda live: [Action(1)] * len(live))  # type: ignore[arg-type]
    for env in envs:
        env.close()


def test_eval_and_the_trainer_both_play_in_this_loop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One loop: ``agentgym eval`` and ``collect_rollouts`` reach :func:`play_lockstep`."""
    import baselines.episodes as episodes
    from baselines.llm.engines import SamplingSettings
    from baselines.llm.policy import load_policy

    seen: list[int] = []
    real = lockstep.play_lockstep

    def counting(pool: Any, seeds: Any, policy: Any, **kw: Any) -> Any:
        seen.append(len(seeds))
        return real(pool, seeds, policy, **kw)

    monkeypatch.setattr("agentgym.eval.play_lockstep", counting)
    monkeypatch.setattr(episodes, "play_lockstep", counting)
    evaluate(
        [FROZEN], RandomAgent(seed=0), episodes=2, seed=0, out=tmp_path / "r.json", progress=False
    )
    model, tok = load_policy("tiny", device="cpu", seed=0)
    sampling = SamplingSettings(max_new_tokens=4, temperature=1.0)
    episodes.collect_rollouts(model, tok, FROZEN, [0], 2, sampling)
    assert seen == [1, 1, 2]  # eval: the random agent acts in batches of one


class _OldStepApi(gym.Wrapper):
    """A real FrozenLake whose ``step`` returns the pre-Gymnasium 4-tuple."""

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated or truncated, info


def test_a_malformed_step_result_ends_only_its_episode() -> None:
    envs = [gym.make(FROZEN), _OldStepApi(gym.make(FROZEN))]
    played = play_lockstep(
        LocalEnvs(envs, catch=True), [0, 2], lambda live: [LEFT] * len(live), catch_errors=True
    )
    assert played[1].steps == [] and played[1].error is not None
    assert played[1].error.startswith("env step failed: ValueError: not enough values to unpack")
    assert played[0].error is None and len(played[0].steps) >= 1
    for env in envs:
        env.close()


class _WaitsForTheOthers(gym.Env):
    """Steps only once ``parties`` environments are stepping at the same time (a barrier): as a
    browser or sandbox would, it waits on something outside, and it declares so."""

    metadata = {"io_bound": True}

    def __init__(self, barrier: threading.Barrier, name: str):
        self.barrier, self.name = barrier, name
        self.observation_space = gym.spaces.Text(100)
        self.action_space = gym.spaces.Text(100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        info = {"instructions": "Wait.", "max_turns": 1, "actions_left": 1}
        return f"{self.name} ready", {**info, "max_actions_per_turn": 1}

    def step(self, action):
        self.barrier.wait(timeout=120)  # BrokenBarrierError when stepped one at a time
        if action == "fail":
            raise RuntimeError(f"{self.name} failed")
        return f"{self.name} got {action}", 1.0, True, False, {}


def test_io_bound_environments_step_together_in_threads() -> None:
    """Three environments that each wait until all three are stepping: played one after the
    other they would never return; declared I/O-bound, they step in threads, and the results come
    back in order. A failing step still lets the others finish, then ends only its episode
    (catch) or is raised (no catch)."""
    barrier = threading.Barrier(3)
    envs = [_WaitsForTheOthers(barrier, f"env{i}") for i in range(3)]
    pool = LocalEnvs(envs)
    assert declares_io_bound(envs[0]) and pool.threads == MAX_STEP_THREADS
    played = play_lockstep(pool, [0, 1, 2], lambda live: [f"a{e.index}" for e in live])
    assert [e.steps[0].action for e in played] == ["a0", "a1", "a2"]
    assert [e.observation for e in played] == [f"env{i} got a{i}" for i in range(3)]
    actions = ["a0", "fail", "a2"]
    caught = play_lockstep(
        LocalEnvs(envs, catch=True), [0, 1, 2], lambda live: actions, catch_errors=True
    )
    assert [e.error for e in caught] == [None, "env step failed: RuntimeError: env1 failed", None]
    assert [len(e.steps) for e in caught] == [1, 0, 1]
    with pytest.raises(RuntimeError, match="env1 failed"):
        play_lockstep(LocalEnvs(envs), [0, 1, 2], lambda live: actions)
    assert barrier.n_waiting == 0 and not barrier.broken  # nobody left waiting
    with pytest.raises(ValueError, match="threads must be >= 1"):
        LocalEnvs(envs, threads=0)
    # Not declared I/O-bound: stepped in the calling thread.
    sokoban = gym.make("agentgym/Sokoban-v0")
    try:
        assert not declares_io_bound(sokoban) and LocalEnvs([sokoban]).threads == 1
    finally:
        sokoban.close()
