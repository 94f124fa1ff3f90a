"""Environments stepped by Ray actors: same rollouts as in-process stepping, and fault tolerance."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
import ray  # noqa: E402  (the `ray` extra is part of `dev`: CI always has it)
import torch

from baselines.config import load_config
from baselines.engines import HFEngine
from baselines.policy import load_policy
from baselines.ray_rollout import RayEnvPool
from baselines.rollout import SamplingSettings, collect_rollouts
from baselines.trainer import Trainer, vocabulary_texts

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

    def generate(self, prompts, sampling):
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
        return super().generate(prompts, sampling)


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
