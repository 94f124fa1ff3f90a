"""Environments stepped by Ray actors, for rollouts spread over cores and over cluster nodes.

The model generates centrally (in the trainer's process, or its vLLM engine); the environments
live in Ray actors (:class:`EnvWorker`), each owning the episodes ``i`` with
``i % num_workers == rank``. :class:`RayEnvPool` offers the pool interface of
:func:`baselines.episodes.collect_rollouts` (``reset_many``, ``step_many``), so episode order, seeds
and results are those of in-process stepping.

Fault tolerance: the pool records each episode's seed and the actions applied so far. When an
actor dies (its process killed, its node lost), the pool starts a replacement, which rebuilds
each of the dead actor's episodes by resetting it with its seed and replaying its recorded
actions (agentgym environments are deterministic given seed and actions), then retries the
interrupted call. Replayed steps are counted apart (``stats["replayed_steps"]``): every episode
step is returned, and counted in ``stats["env_steps"]``, exactly once.

Environments that own sandboxes or browsers (CodeExec, WebShop) work the same way: each actor
holds its own Docker sandbox pool or Chromium. :meth:`RayEnvPool.close` closes every actor's
environments before killing it. An actor killed outright cannot clean up; what it owned carries
its process id (the containers' owner label, the browser's profile dir), and the next sandbox or
browser started on that node (its replacement's, when Ray places it there) removes whatever
belongs to a dead owner, as does :meth:`RayEnvPool.close` on the node it runs on. A step that
raises in an actor is re-raised by :meth:`RayEnvPool.step_many` after the steps that did happen
are recorded, so a later replay rebuilds exactly those.

Example:
    >>> with RayEnvPool("agentgym/Bandit-v0", {}, num_workers=2) as pool:  # doctest: +SKIP
    ...     episodes = collect_rollouts(model, tok, "agentgym/Bandit-v0", [0, 1], 2, s, envs=pool)

Source: Ray actors and fault tolerance, https://docs.ray.io/en/latest/ray-core/actors.html
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

__all__ = ["EnvWorker", "RayEnvPool", "StepFailure"]


class StepFailure:
    """An episode's step that raised inside an actor: the episode index and the exception."""

    def __init__(self, index: int, error: BaseException):
        self.index, self.error = index, error


class EnvWorker:
    """A Ray actor's body: owns environments by global episode index.

    Args:
        env_id: a registered agentgym id.
        env_kwargs: constructor overrides.
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any]):
        import gymnasium as gym

        import agentgym  # noqa: F401  (registers the ids)

        self._make = lambda: gym.make(env_id, **env_kwargs)
        self.envs: dict[int, Any] = {}

    def pid(self) -> int:
        """The actor's process id."""
        return os.getpid()

    def reset(self, items: list[tuple[int, int]]) -> list[tuple[Any, dict[str, Any]]]:
        """Reset episode ``index`` with ``seed`` for each ``(index, seed)``; ``(obs, info)`` each."""
        out = []
        for index, seed in items:
            if index not in self.envs:
                self.envs[index] = self._make()
            out.append(self.envs[index].reset(seed=seed))
        return out

    def step(self, items: list[tuple[int, str]]) -> list[Any]:
        """Step episode ``index`` with ``action``; the 5-tuple of ``Env.step`` for each, or a
        :class:`StepFailure` for an item whose step raised (the other items still run, so the
        pool can record exactly the steps that happened)."""
        out: list[Any] = []
        for index, action in items:
            try:
                out.append(self.envs[index].step(action))
            except Exception as err:  # noqa: BLE001  (returned, re-raised by the pool)
                out.append(StepFailure(index, err))
        return out

    def restore(self, items: list[tuple[int, int, list[str]]]) -> int:
        """Rebuild episodes from ``(index, seed, actions)``: reset, then replay; steps replayed."""
        replayed = 0
        for index, seed, actions in items:
            self.reset([(index, seed)])
            for action in actions:
                self.envs[index].step(action)
                replayed += 1
        return replayed

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()


class RayEnvPool:
    """``num_workers`` Ray actors stepping ``agentgym`` environments for
    :func:`baselines.episodes.collect_rollouts`.

    Args:
        env_id: a registered agentgym id.
        env_kwargs: constructor overrides.
        num_workers: actors (>= 1); episode ``i`` lives in actor ``i % num_workers``.
        address: ``""`` or ``None`` starts a local Ray (``ray.init()``) unless one is running;
            else a cluster address passed to ``ray.init(address=...)``.
        num_cpus_per_worker: CPUs each actor reserves in Ray's scheduler.
        max_restarts: replacements allowed per call before the error is raised.

    Attributes:
        stats: ``env_steps`` (steps returned), ``replayed_steps`` (steps re-run to rebuild a dead
            actor's episodes), ``restarts`` (actors replaced).

    Raises:
        ImportError: Ray is not installed (``pip install 'agentgym[ray]'``).
        ValueError: ``num_workers`` is not a whole number >= 1, or ``env_id`` is not registered.
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any] | None = None,
        num_workers: int = 2,
        *,
        address: str | None = None,
        num_cpus_per_worker: float = 1.0,
        max_restarts: int = 3,
    ):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers: must be a whole number >= 1, got {num_workers!r}")
        import gymnasium as gym

        import agentgym  # noqa: F401  (registers the ids)

        try:
            gym.spec(env_id)  # an unknown id fails here, not inside every actor
        except gym.error.Error as err:
            raise ValueError(f"env_id: {err}") from err
        try:
            import ray
        except ImportError as err:
            raise ImportError(
                "Ray rollouts need Ray: `pip install 'agentgym[ray]'`, or set rollout.ray_workers=0"
            ) from err
        self._ray = ray
        self.owns_ray = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(
                    num_cpus=max(os.cpu_count() or 1, int(num_workers * num_cpus_per_worker) + 1),
                    include_dashboard=False,
                    log_to_driver=False,
                )
            self.owns_ray = True
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.num_workers, self.max_restarts = num_workers, max_restarts
        self._actor_cls = ray.remote(num_cpus=num_cpus_per_worker, max_restarts=0)(EnvWorker)
        self.workers = [self._spawn() for _ in range(num_workers)]
        self.seeds: list[int] = []
        self.actions: list[list[str]] = []
        self.stats = {"env_steps": 0, "replayed_steps": 0, "restarts": 0}

    def _spawn(self) -> Any:
        return self._actor_cls.remote(self.env_id, self.env_kwargs)

    def __len__(self) -> int:
        """Any number of episodes: environments are made on demand."""
        return 2**31 - 1

    def _check_open(self) -> None:
        if not self.workers:
            raise RuntimeError("this RayEnvPool is closed; make a new one")

    def worker_pids(self) -> list[int]:
        """The process id of each actor, in rank order."""
        return self._ray.get([w.pid.remote() for w in self.workers])

    def _owner(self, index: int) -> int:
        return index % self.num_workers

    def _replace(self, rank: int) -> None:
        """Start a new actor for ``rank`` and rebuild its episodes from their seeds."""
        try:
            self._ray.kill(self.workers[rank], no_restart=True)
        except Exception:  # already gone
            pass
        self.workers[rank] = self._spawn()
        self.stats["restarts"] += 1
        items = [
            (i, self.seeds[i], list(self.actions[i]))
            for i in range(len(self.seeds))
            if self._owner(i) == rank
        ]
        if items:
            self.stats["replayed_steps"] += self._ray.get(self.workers[rank].restore.remote(items))

    def _call(self, method: str, per_rank: dict[int, list[Any]]) -> dict[int, list[Any]]:
        """Run ``method`` on each rank's items in parallel, replacing actors that die."""
        from ray.exceptions import RayActorError

        results: dict[int, list[Any]] = {}
        pending = {
            rank: getattr(self.workers[rank], method).remote(items)
            for rank, items in per_rank.items()
        }
        attempts = dict.fromkeys(per_rank, 0)
        while pending:
            rank, ref = next(iter(pending.items()))
            try:
                results[rank] = self._ray.get(ref)
                del pending[rank]
            except RayActorError:
                attempts[rank] += 1
                if attempts[rank] > self.max_restarts:
                    raise
                self._replace(rank)
                pending[rank] = getattr(self.workers[rank], method).remote(per_rank[rank])
        return results

    def reset_many(self, seeds: list[int]) -> list[tuple[Any, dict[str, Any]]]:
        """Reset episodes ``0..len(seeds)-1`` with their seeds; ``(obs, info)`` in episode order."""
        self._check_open()
        self.seeds = list(seeds)
        self.actions = [[] for _ in seeds]
        per_rank: dict[int, list[Any]] = {}
        for i, seed in enumerate(seeds):
            per_rank.setdefault(self._owner(i), []).append((i, seed))
        results = self._call("reset", per_rank)
        return self._gather(per_rank, results, len(seeds), list(range(len(seeds))))

    def step_many(self, indices: list[int], actions: list[str]) -> list[tuple]:
        """Step episode ``indices[k]`` with ``actions[k]``; the results in the order given.

        Raises:
            ValueError: an index that :meth:`reset_many` did not reset.
            Exception: the first step that raised inside an actor (re-raised here, after every
                step that did happen was recorded for replay).
        """
        self._check_open()
        bad = [i for i in indices if not 0 <= i < len(self.seeds)]
        if bad:
            raise ValueError(
                f"step_many: episodes {bad} were not reset (reset_many gave {len(self.seeds)})"
            )
        per_rank: dict[int, list[Any]] = {}
        for i, action in zip(indices, actions, strict=True):
            per_rank.setdefault(self._owner(i), []).append((i, action))
        results = self._call("step", per_rank)
        out = self._gather(per_rank, results, len(indices), indices)
        failures = [r for r in out if isinstance(r, StepFailure)]
        for i, action, result in zip(indices, actions, out, strict=True):
            if not isinstance(result, StepFailure):
                self.actions[i].append(action)
                self.stats["env_steps"] += 1
        if failures:
            raise failures[0].error
        return out

    @staticmethod
    def _gather(per_rank, results, count, order) -> list[Any]:
        by_index = {}
        for rank, items in per_rank.items():
            for item, result in zip(items, results[rank], strict=True):
                by_index[item[0]] = result
        out = [by_index[i] for i in order]
        assert len(out) == count
        return out

    def close(self, timeout: float = 60.0) -> None:
        """Close every actor's environments (their sandboxes and browsers), then kill the actors
        (and shut Ray down if this pool started it). An actor that is dead or does not answer
        within ``timeout`` seconds is killed anyway, and then what it owned on this node is
        removed here (owner-pid labels, see :func:`agentgym.cleanup.reap_orphans`); on another node, by the next
        sandbox or browser started there."""
        refs = []
        for worker in self.workers:
            with contextlib.suppress(Exception):
                refs.append(worker.close.remote())
        closed = 0
        if refs:
            try:
                ready, _ = self._ray.wait(refs, num_returns=len(refs), timeout=timeout)
                for ref in ready:
                    with contextlib.suppress(Exception):
                        self._ray.get(ref)
                        closed += 1
            except Exception:  # noqa: BLE001
                pass
        left_behind = self.stats["restarts"] > 0 or closed < len(self.workers)
        for worker in self.workers:
            try:
                self._ray.kill(worker, no_restart=True)
            except Exception:
                pass
        self.workers = []
        if left_behind:  # a killed actor could not close its sandboxes or browser
            from agentgym.cleanup import reap_orphans

            reap_orphans()
        if self.owns_ray:
            self._ray.shutdown()
            self.owns_ray = False

    def __enter__(self) -> RayEnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
