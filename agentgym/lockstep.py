"""The one lock-step episode loop: the trainer's rollouts and ``agentgym eval`` both play here.

:func:`play_lockstep` resets a batch of environments, then, until every episode has ended, asks a
policy for one action per live episode (one call per turn of the batch, so a model generates for the
whole batch at once) and steps each environment with its action. What differs between callers is
only the policy callback:

- ``baselines.episodes.collect_rollouts`` (trainer rollouts and validation): the callback renders
  each prompt as token ids (:class:`baselines.llm.prompts.TokenContext`), generates with the rollout
  engine and returns each reply as an :class:`Action` whose ``sample`` holds the prompt and
  sampled ids (:class:`baselines.episodes.Sample`), which the loop keeps on the turn's
  :class:`Step`: one record per turn. A prompt that no longer fits the context ends its episode
  as truncated (:data:`END_EPISODE`).
- ``agentgym eval`` (every agent, ``hf:`` checkpoints included): the callback turns each live
  episode into an :class:`agentgym.agents.AgentRequest` and calls ``agent.act``; the ``hf:`` agent
  renders and generates through the same ``TokenContext`` and engine as the trainer, so a
  checkpoint is scored on exactly the prompts it was trained on.

The conversation each episode keeps (:class:`agentgym.chat.ChatEpisode`) is recorded here, once,
from the action text and the environment's reply, so both callers see the same messages.

Errors: with ``catch_errors=True`` (eval) a failing reset, step or policy call ends only the
episodes it concerns, with ``error`` set and the steps played so far kept; with ``False`` (the
trainer) the exception propagates, since a batch with a missing episode cannot be trained on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentgym.chat import ChatEpisode

__all__ = [
    "Action",
    "END_EPISODE",
    "LiveEpisode",
    "LocalEnvs",
    "MAX_STEP_THREADS",
    "Step",
    "declares_io_bound",
    "play_lockstep",
]

S = TypeVar("S")


class _EndEpisode:
    """The type of :data:`END_EPISODE`."""

    _instance: _EndEpisode | None = None

    def __new__(cls) -> _EndEpisode:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "END_EPISODE"


#: What a policy returns for an episode it cannot act in (its prompt no longer fits the model's
#: context): the episode ends as truncated, without a step and without an error.
END_EPISODE = _EndEpisode()


@dataclass(frozen=True)
class Action(Generic[S]):
    """What a policy may return for an episode instead of the bare action text: the text the
    environment steps with, and an opaque ``sample`` the loop keeps on the turn's :class:`Step`
    (e.g. the token ids a model was given and sampled, :class:`baselines.episodes.Sample`)."""

    text: str
    sample: S | None = None


@dataclass
class Step(Generic[S]):
    """One played turn: the action text, what ``env.step`` returned, and the policy's payload.

    The one record of a turn: ``agentgym eval`` writes its bundle step from it
    (:func:`agentgym.bundle.step_record`), and the trainer's episode records hold these steps
    (``sample`` a :class:`baselines.episodes.Sample`).

    Attributes:
        action: the text the environment was stepped with.
        reward: the step's reward (the loop stores a Python float).
        terminated, truncated: as ``env.step`` returned them (the loop stores Python bools).
        info: the step's ``info`` (the loop stores a copy).
        sample: the ``sample`` of the policy's :class:`Action`; ``None`` for a plain-str action.
    """

    action: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    sample: S | None = None


@dataclass
class LiveEpisode:
    """One episode of a lock-step batch, in progress or ended.

    Attributes:
        index: its position in the batch (0 .. len(seeds) - 1).
        seed: its reset seed.
        observation, info: the latest observation and ``info`` (the reset's before turn 1).
        reset_info: the reset's ``info`` (holds the task ``instructions``).
        chat: the conversation so far (``None`` only when the reset failed).
        steps: the steps played, in order.
        error: why the episode stopped early (``catch_errors=True`` only), else ``None``.
        terminated, truncated: how it ended (``truncated`` also after :data:`END_EPISODE`).
        done: it has ended.
    """

    index: int
    seed: int
    observation: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    reset_info: dict[str, Any] = field(default_factory=dict)
    chat: ChatEpisode | None = None
    steps: list[Step] = field(default_factory=list)
    error: str | None = None
    terminated: bool = False
    truncated: bool = False
    done: bool = False

    @property
    def turn(self) -> int:
        """The 1-based number of the turn about to be played."""
        return len(self.steps) + 1

    @property
    def last_reward(self) -> float | None:
        return self.steps[-1].reward if self.steps else None


#: Threads that step the environments of one batch at most, when they declare themselves
#: I/O-bound (:class:`LocalEnvs`).
MAX_STEP_THREADS = 8


def declares_io_bound(env: Any) -> bool:
    """Whether ``env`` (a Gymnasium environment, wrappers included) declares that its steps wait
    on something outside the process (``metadata["io_bound"]``: a browser, a sandbox), so that
    several may step at once in threads."""
    metadata = getattr(env, "metadata", None) or {}
    return bool(metadata.get("io_bound", False))


class LocalEnvs:
    """In-process environments behind the pool interface of :func:`play_lockstep`.

    Environments whose steps wait on another process (``metadata["io_bound"]``, e.g.
    ``WebShop-v0``'s browser, ``CodeExec-v0``'s sandbox; :func:`declares_io_bound`) reset and
    step in a thread pool of up to ``threads`` threads, so one turn's steps overlap instead of
    queueing one behind the other: the cores are not idle while a page loads or a container runs
    a test. Each environment is stepped by one thread at a time, and the results come back in
    the order asked, so an episode sees what it would see stepped alone. A pool with no
    I/O-bound environment steps in the calling thread (steps of microseconds; a thread would
    cost more); one that has any steps all of its environments in the threads.

    Args:
        envs: one environment per episode slot.
        catch: return an exception raised by ``reset``/``step`` in that episode's place instead of
            raising it (the loop then ends that episode only).
        threads: the pool's size for I/O-bound environments (at least 1; 1 steps them in the
            calling thread).

    Raises:
        ValueError: ``threads`` below 1.
    """

    def __init__(self, envs: Sequence[Any], catch: bool = False, threads: int = MAX_STEP_THREADS):
        if threads < 1:
            raise ValueError(f"LocalEnvs: threads must be >= 1, got {threads}")
        self.envs = list(envs)
        self.catch = catch
        self.threads = threads if any(declares_io_bound(env) for env in self.envs) else 1

    def __len__(self) -> int:
        return len(self.envs)

    def _call(self, fn: Callable[[], Any]) -> Any:
        if not self.catch:
            return fn()
        try:
            return fn()
        except Exception as err:  # the loop records it on the episode
            return err

    def _map(self, calls: list[Callable[[], Any]]) -> list[Any]:
        if self.threads == 1 or len(calls) < 2:
            return [self._call(fn) for fn in calls]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(self.threads, len(calls))) as pool:
            futures = [pool.submit(self._call, fn) for fn in calls]
        # Past the ``with``, every call has finished: an error (catch=False) propagates only
        # then, and no thread is left stepping an environment the caller goes on to close.
        return [f.result() for f in futures]

    def reset_many(self, seeds: Sequence[int]) -> list[Any]:
        return self._map(
            [
                lambda env=env, seed=seed: env.reset(seed=seed)
                for env, seed in zip(self.envs, seeds, strict=False)
            ]
        )

    def step_many(self, indices: Sequence[int], actions: Sequence[str]) -> list[Any]:
        return self._map(
            [
                lambda env=self.envs[i], a=a: env.step(a)
                for i, a in zip(indices, actions, strict=True)
            ]
        )


Policy = Callable[[list[LiveEpisode]], Sequence[Any]]


def _failure(what: str, err: BaseException) -> str:
    return f"{what} failed: {type(err).__name__}: {err}"


def play_lockstep(
    pool: Any,
    seeds: Sequence[int],
    policy: Policy,
    *,
    catch_errors: bool = False,
    timings: dict[str, float] | None = None,
) -> list[LiveEpisode]:
    """Play ``len(seeds)`` episodes in lock step; episode i resets with ``seeds[i]``.

    Args:
        pool: environments with ``reset_many(seeds)`` and ``step_many(indices, actions)`` (a
            :class:`LocalEnvs`, or e.g. :class:`baselines.ray_rollout.RayEnvPool`), at least
            ``len(seeds)`` of them; an item of their result that is an exception ends that
            episode with ``error`` (with ``catch_errors``) or is raised.
        seeds: one reset seed per episode.
        policy: called once per turn with the live episodes (in index order); returns one item
            per episode: the action text, an :class:`Action` (its text, and a ``sample`` kept as
            :attr:`Step.sample`), an exception (the episode ends with its message as ``error``)
            or :data:`END_EPISODE`.
        catch_errors: record failures on the episodes they concern instead of raising.
        timings: if given, ``timing/env_s`` (resets and steps, seconds) is added to it.

    Returns:
        The episodes in index order, all ended.

    Raises:
        ValueError: the pool is smaller than the batch, or (without ``catch_errors``) the policy
            returned the wrong number of items or an item that is not a str or an Action with a
            str text.
        Exception: without ``catch_errors``, whatever a reset, step or the policy raised.
    """
    if len(pool) < len(seeds):
        raise ValueError(f"need {len(seeds)} environments, got {len(pool)}")
    episodes = [LiveEpisode(i, int(seed)) for i, seed in enumerate(seeds)]
    env_s = 0.0

    def fail(episode: LiveEpisode, message: str, err: BaseException | None = None) -> None:
        if not catch_errors:
            raise err if err is not None else ValueError(message)
        episode.error, episode.done = message, True

    t0 = time.perf_counter()
    resets = pool.reset_many(list(seeds)[: len(episodes)])
    env_s += time.perf_counter() - t0
    for episode, result in zip(episodes, resets, strict=True):
        try:
            if isinstance(result, BaseException):
                raise result
            observation, info = result
            episode.chat = ChatEpisode.from_reset(observation, info)
            episode.observation, episode.info = observation, dict(info)
            episode.reset_info = dict(info)  # a policy that edits ``info`` cannot change it
        except Exception as err:
            fail(episode, _failure("env reset", err), err)
    try:
        while live := [e for e in episodes if not e.done]:
            try:
                actions = list(policy(live))
                if len(actions) != len(live):
                    raise ValueError(f"the policy returned {len(actions)} actions for {len(live)}")
            except Exception as err:
                if not catch_errors:
                    raise
                actions = [RuntimeError(_failure("agent", err))] * len(live)
            stepping: list[tuple[LiveEpisode, Action[Any]]] = []
            for episode, action in zip(live, actions, strict=True):
                if action is END_EPISODE:
                    episode.truncated = episode.done = True
                elif isinstance(action, BaseException):
                    fail(episode, str(action), action)
                elif isinstance(action, str):
                    stepping.append((episode, Action(action)))
                elif isinstance(action, Action) and isinstance(action.text, str):
                    stepping.append((episode, action))
                else:
                    what = type(action).__name__
                    if isinstance(action, Action):
                        what = f"Action whose text is a {type(action.text).__name__}"
                    fail(episode, f"the policy returned a {what}, not a str or an Action of text")
            if not stepping:
                continue
            t0 = time.perf_counter()
            results = pool.step_many([e.index for e, _ in stepping], [a.text for _, a in stepping])
            env_s += time.perf_counter() - t0
            for (episode, action), result in zip(stepping, results, strict=True):
                try:
                    if isinstance(result, BaseException):
                        raise result
                    observation, reward, terminated, truncated, info = result
                    step = Step(
                        action.text,
                        float(reward),
                        bool(terminated),
                        bool(truncated),
                        dict(info),
                        action.sample,
                    )
                    assert episode.chat is not None
                    episode.chat.record(
                        action.text, observation, reward, terminated, truncated, info
                    )
                except Exception as err:  # a failed step, or a result that is not a 5-tuple
                    fail(episode, _failure("env step", err), err)
                    continue
                episode.steps.append(step)
                episode.observation, episode.info = observation, dict(info)
                if terminated or truncated:
                    episode.terminated, episode.truncated = bool(terminated), bool(truncated)
                    episode.done = True
    finally:
        if timings is not None:
            timings["timing/env_s"] = timings.get("timing/env_s", 0.0) + env_s
    return episodes
