"""Environments stepped by Ray actors: same rollouts as in-process stepping, and fault tolerance,
also for the environments that own a browser (WebShop-v0) or Docker sandboxes (CodeExec)."""

from __future__ import annotations

import json
import os
import signal
import socket
import tempfile
import time
from pathlib import Path

import gymnasium
import psutil
import pytest
import ray  # noqa: E402  (the `ray` extra is part of `dev`: CI always has it)
import torch

from baselines.config import load_config
from baselines.episodes import collect_rollouts, vocabulary_texts
from baselines.llm.engines import HFEngine, SamplingSettings
from baselines.llm.policy import load_policy
from baselines.ray_rollout import RayEnvPool
from baselines.trainer import Trainer
from sandboxes.web.browser import PROFILE_PREFIX
from tests.test_sandbox_docker import _containers, _docker_or_fail

ENV = "agentgym/Sokoban-v0"
KWARGS = {"max_turns": 3}
SEEDS = [11, 12, 13]
SAMPLING = SamplingSettings(max_new_tokens=6, think_prefix=False)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny():
    return load_policy("tiny", texts=vocabulary_texts(ENV, {}, range(16)), seed=0)


def _play(model, tokenizer, envs=None, engine=None):
    torch.manual_seed(7)
    episodes = collect_rollouts(
        model, tokenizer, ENV, SEEDS, 2, SAMPLING, env_kwargs=KWARGS, envs=envs, engine=engine
    )
    return [
        (
            e.group,
            e.seed,
            e.chat.messages(),
            [(t.reward, t.info) for t in e.turns],
            e.terminated,
            e.truncated,
        )
        for e in episodes
    ]


@pytest.fixture(scope="module")
def in_process(tiny):
    return _play(*tiny)


@pytest.mark.parametrize("workers", [1, 2])
def test_same_seeds_give_the_same_rollouts_as_in_process_stepping(tiny, in_process, workers):
    with RayEnvPool(ENV, KWARGS, num_workers=workers) as pool:
        assert not pool.owns_ray  # the module's Ray is reused
        got = _play(*tiny, envs=pool)
        turns = sum(len(ep[3]) for ep in got)
        assert pool.stats == {"env_steps": turns, "replayed_steps": 0, "restarts": 0}
        assert len(set(pool.worker_pids())) == workers
    assert got == in_process
    assert turns == 6 * 3  # 6 episodes, none solved by a random policy in its 3 turns


class _KillBeforeTurn(HFEngine):
    """An HF engine that SIGKILLs one Ray actor's process when asked for turn ``turn``."""

    def __init__(self, model, tokenizer, pool: RayEnvPool, rank: int, turn: int):
        super().__init__(model, tokenizer)
        self.pool, self.rank, self.turn, self.calls = pool, rank, turn, 0
        self.killed_pid = None

    def generate(self, prompts, sampling, generators=None):
        self.calls += 1
        if self.calls == self.turn:
            self.killed_pid = self.pool.worker_pids()[self.rank]
            os.kill(self.killed_pid, signal.SIGKILL)
            for _ in range(200):  # until the process is gone (bounded)
                try:
                    os.kill(self.killed_pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
        return super().generate(prompts, sampling, generators)


def test_a_killed_worker_is_replaced_and_the_batch_is_complete_and_correct(tiny, in_process):
    model, tokenizer = tiny
    with RayEnvPool(ENV, KWARGS, num_workers=2) as pool:
        engine = _KillBeforeTurn(model, tokenizer, pool, rank=1, turn=3)
        got = _play(model, tokenizer, envs=pool, engine=engine)
        assert engine.killed_pid is not None
        assert engine.killed_pid not in pool.worker_pids()  # a new actor took rank 1
        # Rank 1 owns episodes 1, 3, 5; killed before turn 3, each had 2 recorded actions to
        # replay. Every one of the 18 steps is returned (and counted) once.
        assert pool.stats == {"env_steps": 18, "replayed_steps": 3 * 2, "restarts": 1}
    assert got == in_process


def test_a_step_that_raises_leaves_the_steps_that_happened_recorded():
    """Episode 1 is over, so its step raises in its actor; episode 0's step (another actor) and
    episode 2's (the same actor, listed before it) did happen: they are recorded, so a replay
    after a worker dies rebuilds them."""
    bandit = "agentgym/Bandit-v0"
    pull = "<think>t</think><answer>1</answer>"
    with RayEnvPool(bandit, {}, num_workers=2) as pool:
        pool.reset_many([0, 1, 2])
        pool.step_many([1], [pull])  # Bandit ends after one pull
        with pytest.raises(RuntimeError, match="the episode is over"):
            pool.step_many([0, 2, 1], [pull, pull, pull])
        assert pool.actions == [[pull], [pull], [pull]]
        assert pool.stats["env_steps"] == 3
        with pytest.raises(ValueError, match=r"episodes \[7\] were not reset"):
            pool.step_many([7], [pull])
    with pytest.raises(RuntimeError, match="closed"):
        pool.reset_many([0])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_workers": 0}, ValueError, "num_workers: must be a whole number >= 1, got 0"),
        ({"num_workers": 1.5}, ValueError, "got 1.5"),
        ({"env_id": "agentgym/Nope-v0"}, ValueError, "env_id: .*Nope"),
    ],
)
def test_bad_pool_arguments_fail_before_any_actor_starts(kwargs, error, message):
    args = {"env_id": "agentgym/Bandit-v0", "num_workers": 1, **kwargs}
    with pytest.raises(error, match=message):
        RayEnvPool(args.pop("env_id"), {}, **args)


def test_trainer_with_ray_workers_logs_what_the_in_process_trainer_logs(tmp_path):
    common = [
        "model.path=tiny",
        "rollout.env_id=agentgym/Bandit-v0",
        "rollout.env_kwargs={action_format: raw, high_arm_prob: 1.0}",
        "rollout.think_prefix=false",
        "rollout.max_new_tokens=1",
        "rollout.num_groups=2",
        "rollout.group_size=2",
        "rollout.val_episodes=2",
        "train.steps=2",
        "train.threads=1",
        "algorithm.lr=0.01",
        "diagnostics.every=0",
        "filter.strategy=none",
    ]
    runs = []
    for workers in (0, 2):
        config = load_config(
            None,
            [*common, f"rollout.ray_workers={workers}", f"train.out_dir={tmp_path / str(workers)}"],
        )
        history = Trainer(config, progress=False).run()
        runs.append([{k: v for k, v in h.items() if not k.startswith("timing/")} for h in history])
    assert json.dumps(runs[0]) == json.dumps(runs[1])  # NaN-aware (filter/score_mean_dropped)


# --- Environments that own sandboxes and browsers, under Ray ----------------------------------

WEB = "agentgym/WebShop-v0"
CODE = "agentgym/CodeExecGenerated-v0"


def _oracle_scripts(
    env_id: str, kwargs: dict, seeds: list[int], turns: int, first=None
) -> tuple[list, list]:
    """In-process reference: each episode played by its oracle for up to ``turns`` turns, after
    a first action ``first(reset info)`` when given.

    Returns ``(scripts, results)``: the action per episode and turn, and the ``(obs, info)`` of
    each reset followed by every step's 5-tuple."""
    scripts, results = [], []
    for seed in seeds:
        env = gymnasium.make(env_id, **kwargs)
        try:
            out = [env.reset(seed=seed)]
            actions = []
            for turn in range(turns):
                if turn == 0 and first is not None:
                    actions.append(first(out[0][1]))
                else:
                    actions.append(env.unwrapped.oracle_answer())
                out.append(env.step(actions[-1]))
                if out[-1][2] or out[-1][3]:
                    break
        finally:
            env.close()
        scripts.append(actions)
        results.append(out)
    return scripts, results


def _play_scripts(
    pool: RayEnvPool,
    seeds: list[int],
    scripts: list,
    kill_before_turn: int,
    before_kill=lambda pid: None,
):
    """The scripted episodes stepped by ``pool``; the actor of rank 1 is SIGKILLed just before
    turn ``kill_before_turn`` (``before_kill(pid)`` runs first). Returns
    ``(results, killed pid)``."""
    results = [[r] for r in pool.reset_many(seeds)]
    killed = None
    for turn in range(max(len(s) for s in scripts)):
        if turn == kill_before_turn:
            killed = pool.worker_pids()[1]
            before_kill(killed)
            victim = psutil.Process(killed)
            victim.send_signal(signal.SIGKILL)
            psutil.wait_procs([victim], timeout=10)
        live = [i for i, s in enumerate(scripts) if turn < len(s)]
        steps = pool.step_many(live, [scripts[i][turn] for i in live])
        for i, step in zip(live, steps, strict=True):
            results[i].append(step)
    assert killed is not None, "the episodes ended before the kill"
    return results, killed


def _processes_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line mentions ``marker``."""
    out = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
            marker in part for part in proc.info["cmdline"] or ()
        ):
            out.append(proc.pid)
    return out


def _without_restarts(results: list[list[tuple]]) -> list[list[tuple]]:
    """The results with ``info["browser_restarts"]`` (an operational counter) removed."""
    return [
        [(*step[:-1], {k: v for k, v in step[-1].items() if k != "browser_restarts"}) for step in r]
        for r in results
    ]


def test_browser_envs_under_ray_survive_a_killed_worker_and_leave_no_browser():
    """WebShop-v0 (a real Chromium per actor): identical to in-process stepping with a worker
    killed mid-episode; the dead actor's browser is reaped by its replacement, and closing the
    pool closes every actor's browser."""
    seeds = [0, 1, 2]
    scripts, expected = _oracle_scripts(WEB, {}, seeds, turns=6)
    assert all(r[-1][2] and r[-1][1] == 1.0 for r in expected)  # the oracle buys the right item
    with RayEnvPool(WEB, {}, num_workers=2) as pool:
        # Turn 2: rank 1 (episode 1) has a browser with pages open.
        got, killed = _play_scripts(pool, seeds, scripts, kill_before_turn=2)
        actors = pool.worker_pids()
        assert killed not in actors
        assert pool.stats["restarts"] == 1 and pool.stats["replayed_steps"] == 2
        # The replacement started its own browser, reaping the dead actor's first.
        assert _processes_with(f"{PROFILE_PREFIX}{killed}-") == []
        assert not list(Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}{killed}-*"))
        assert all(_processes_with(f"{PROFILE_PREFIX}{pid}-") for pid in actors)
    # A browser restart under load is recovered inside the env and reported in info; it is not
    # part of the episode (observations, rewards and flags must match exactly).
    assert _without_restarts(got) == _without_restarts(expected)
    for pid in actors:  # closed by the actors themselves: processes gone, profiles removed
        assert _processes_with(f"{PROFILE_PREFIX}{pid}-") == []
        assert not list(Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}{pid}-*"))
    # An actor killed and never replaced: close() itself reaps what it left.
    with RayEnvPool(WEB, {}, num_workers=1) as pool:
        pool.reset_many([0])
        pool.step_many([0], [scripts[0][0]])
        (victim,) = pool.worker_pids()
        assert _processes_with(f"{PROFILE_PREFIX}{victim}-")
        proc = psutil.Process(victim)
        proc.send_signal(signal.SIGKILL)
        psutil.wait_procs([proc], timeout=10)
    assert _processes_with(f"{PROFILE_PREFIX}{victim}-") == []
    assert not list(Path(tempfile.gettempdir()).glob(f"{PROFILE_PREFIX}{victim}-*"))


def test_docker_sandboxed_envs_under_ray_survive_a_killed_worker_and_leave_no_container():
    """CodeExecGenerated-v0 on the Docker back end: the answers are graded identically with a
    worker killed between two attempts; the dead actor's containers are removed by its
    replacement's sandbox, and closing the pool removes every actor's containers."""
    # The Docker tests' probe: fails in CI without a daemon and image (skips only outside CI).
    probe = _docker_or_fail(pool_size=1)

    def owned_by(pid: int) -> list[dict]:
        return _containers(probe, owner=f"{socket.gethostname()}:{pid}")

    kwargs = {"backend": "docker"}
    seeds = [0, 1, 2, 3]

    def wrong(info: dict) -> str:  # the right function, the wrong result: runs in a sandbox
        return (
            f"<think>t</think><answer>def {info['entry_point']}(*args):\n    return None</answer>"
        )

    scripts, expected = _oracle_scripts(CODE, kwargs, seeds, turns=2, first=wrong)
    # The wrong answer fails every test; then the oracle passes them all.
    assert [[step[1] for step in r[1:]] for r in expected] == [[0.0, 1.0]] * 4
    held = []
    with RayEnvPool(CODE, kwargs, num_workers=2) as pool:
        got, killed = _play_scripts(
            pool,
            seeds,
            scripts,
            kill_before_turn=1,
            before_kill=lambda pid: held.append(owned_by(pid)),
        )
        assert held[0]  # the victim held containers when it died
        assert owned_by(killed) == []
        actors = pool.worker_pids()
        assert all(owned_by(pid) for pid in actors)
        # Rank 1 owns episodes 1 and 3, each with one recorded step to replay.
        assert pool.stats == {"env_steps": 8, "replayed_steps": 2, "restarts": 1}
    assert got == expected
    assert [owned_by(pid) for pid in actors] == [[], []]
    # An actor killed and never replaced: close() itself removes its containers.
    with RayEnvPool(CODE, kwargs, num_workers=1) as pool:
        pool.reset_many([0])
        pool.step_many([0], [scripts[0][0]])
        (victim,) = pool.worker_pids()
        assert owned_by(victim)
        proc = psutil.Process(victim)
        proc.send_signal(signal.SIGKILL)
        psutil.wait_procs([proc], timeout=10)
    assert owned_by(victim) == []
    probe.close()
