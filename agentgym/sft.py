"""Supervised warm-start data: oracle episodes as chat transcripts (``agentgym export-sft``).

A random-init or untuned model's reasoning does not depend on its input (MI 0), so RL from it
cannot show template collapse: there is no input dependence to lose. Fine-tuning first on oracle
episodes whose reasoning *names what the oracle saw* (the arms, the position, the plan) gives a
policy that starts near the MI ceiling (``python -m baselines.sft``).

Each episode is played by the environment's oracle (``env.unwrapped.oracle_actions()``) through
the project's one episode loop (:func:`agentgym.lockstep.play_lockstep`, the trainer's and
``agentgym eval``'s), which records it with :class:`agentgym.chat.ChatEpisode`, the chat layer the
trainer and the eval harness build prompts from, so the SFT prompts are the RL prompts. Every
assistant message is ``<think>{reasoning}</think><answer>{actions}</answer>`` (the env's
``think_answer`` format); the reasoning is the environment's own
``env.unwrapped.oracle_reasoning(actions)`` (:meth:`agentgym.text_env.TextEnv.oracle_reasoning`).

Seeds: ``agentgym export-sft`` starts at :data:`SFT_SEED_START` (2,000,000) unless told otherwise
(``--seed-start``), so SFT episodes never share a reset seed, and so an initial state, with the RL
trainer's training episodes (``rollout.train_seed + step * P + g``, from 0) or its validation
episodes (``rollout.val_seed + i``, from 1,000,000): a model is never warm-started on the very
levels RL then trains or is validated on. (Disjoint while RL uses fewer than 1,000,000 training
seeds and validation fewer than 1,000,000 episodes.)

A noisy oracle (``epsilon`` > 0, ``agentgym export-sft --epsilon``) plays, at each turn with
probability ``epsilon``, as many actions drawn uniformly from ``env.unwrapped.valid_actions()``
as the oracle would have played, and writes its reasoning for the actions it played
(``oracle_reasoning(actions)``): a warm start whose success sits between random and the oracle,
so RL has room both ways (issue 23, claim (b)'s mid-success start). The draws come from a
generator seeded by ``(NOISE_SEED_SALT, reset seed)`` only: the same seed gives the same episode
whatever else is exported. Records of a noisy export carry ``"epsilon"``.

One JSON object per line::

    {"env_id": "agentgym/Bandit-v0", "env_kwargs": {}, "seed": 2000000, "return": 1.0,
     "success": true, "messages": [{"role": "system", ...}, {"role": "user", ...},
                                   {"role": "assistant", "content": "<think>...</think>..."}]}

Example:
    >>> records = list(oracle_episodes("agentgym/Bandit-v0", [0]))
    >>> records[0]["messages"][-1]["content"].startswith("<think>The arms are")
    True
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

from agentgym.lockstep import END_EPISODE, LiveEpisode, LocalEnvs, play_lockstep
from agentgym.parsing import format_answer

__all__ = ["NOISE_SEED_SALT", "SFT_SEED_START", "oracle_episodes", "export_sft"]

#: First reset seed of ``agentgym export-sft``: far from the RL trainer's training seeds (from
#: ``rollout.train_seed``, default 0) and validation seeds (from ``rollout.val_seed``, default
#: 1,000,000), so SFT, RL and validation episodes are disjoint by construction.
SFT_SEED_START = 2_000_000

#: First entry of the seed of a noisy oracle's generator, ``(NOISE_SEED_SALT, reset seed)``: apart
#: from every other stream seeded from a reset seed.
NOISE_SEED_SALT = 0x5F7E


def oracle_episodes(
    env_id: str,
    seeds: Iterable[int],
    env_kwargs: dict[str, Any] | None = None,
    *,
    only_success: bool = False,
    epsilon: float = 0.0,
) -> Iterator[dict[str, Any]]:
    """Play the oracle on each seed and yield one chat record per episode (module docstring).

    Args:
        env_id: a registered agentgym id whose envs have an oracle.
        seeds: reset seeds, one episode each (training data: start at :data:`SFT_SEED_START`).
        env_kwargs: constructor overrides (``action_format`` is forced to ``think_answer``).
        only_success: skip episodes the oracle did not win (e.g. slippery ice).
        epsilon: probability in [0, 1] that a turn plays uniformly drawn valid actions instead
            of the oracle's (module docstring); 0 is the oracle.

    Yields:
        dicts with ``env_id``, ``env_kwargs``, ``seed``, ``return``, ``success``, ``messages``
        (and ``epsilon`` when it is above 0).

    Raises:
        ValueError: the environment has no oracle, ``action_format`` is given and is not
            ``think_answer``, ``epsilon`` is outside [0, 1], or ``epsilon`` > 0 for an
            environment whose ``valid_actions()`` is None (no finite action list to draw from).
    """
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"epsilon: a probability in [0, 1], got {epsilon!r}")
    kwargs = dict(env_kwargs or {})
    if kwargs.get("action_format", "think_answer") != "think_answer":
        raise ValueError(
            "SFT data needs reasoning: leave action_format unset or set it to think_answer, "
            f"got {kwargs['action_format']!r}"
        )
    kwargs["action_format"] = "think_answer"
    env = gymnasium.make(env_id, **kwargs)
    base = env.unwrapped
    if not callable(getattr(base, "oracle_actions", None)):
        env.close()
        raise ValueError(f"{env_id} has no oracle (oracle_actions); it cannot give SFT data")
    pool, policy = LocalEnvs([env]), _oracle_policy([base], epsilon)
    try:
        # One seed at a time on the one environment: records stream out as they are played.
        for seed in seeds:
            (episode,) = play_lockstep(pool, [int(seed)], policy)
            assert episode.chat is not None
            if not episode.chat.done:
                continue  # the oracle had no move (END_EPISODE): not a demonstration
            success = bool(episode.steps[-1].info.get("success", False))
            if only_success and not success:
                continue
            yield {
                "env_id": env_id,
                "env_kwargs": dict(env_kwargs or {}),
                "seed": episode.seed,
                "return": sum((step.reward for step in episode.steps), 0.0),
                "success": success,
                **({"epsilon": epsilon} if epsilon > 0 else {}),
                "messages": episode.chat.messages(),
            }
    finally:
        env.close()


def _oracle_policy(
    envs: list[Any], epsilon: float = 0.0
) -> Callable[[list[LiveEpisode]], list[Any]]:
    """A :func:`~agentgym.lockstep.play_lockstep` policy: episode i's unwrapped ``envs[i]`` plays
    its oracle's turn, ``<think>`` from its ``oracle_reasoning``; :data:`END_EPISODE` where the
    oracle has no move (e.g. a stuck box). With ``epsilon`` > 0, each turn is, with that
    probability, as many uniform draws from ``valid_actions()`` (module docstring)."""
    noise: dict[int, np.random.Generator] = {}  # per episode, made at its first turn

    def act(live: list[LiveEpisode]) -> list[Any]:
        replies: list[Any] = []
        for episode in live:
            env = envs[episode.index]
            actions = list(env.oracle_actions())
            if not actions:
                replies.append(END_EPISODE)
                continue
            if epsilon > 0:
                if episode.turn == 1:
                    noise[episode.index] = np.random.default_rng([NOISE_SEED_SALT, episode.seed])
                rng = noise[episode.index]
                if rng.random() < epsilon:
                    valid = env.valid_actions()
                    if not valid:
                        raise ValueError(
                            f"epsilon > 0 needs a finite action list; {type(env).__name__}."
                            "valid_actions() gave none: export with epsilon 0"
                        )
                    actions = [str(valid[int(rng.integers(len(valid)))]) for _ in actions]
            think = env.oracle_reasoning(actions)
            replies.append(format_answer(actions, "think_answer", think=think))
        return replies

    return act


def export_sft(
    env_ids: list[str],
    seeds: Iterable[int],
    out: str | Path,
    env_kwargs: dict[str, Any] | None = None,
    *,
    only_success: bool = True,
    epsilon: float = 0.0,
) -> dict[str, int]:
    """Write the oracle episodes of every id and seed to the JSONL file ``out``.

    ``seeds`` are the reset seeds (``agentgym export-sft`` gives ``SFT_SEED_START,
    SFT_SEED_START + 1, ...``: see the module docstring for why not 0). ``only_success`` and
    ``epsilon``: as in :func:`oracle_episodes` (a noisy export usually keeps its failures).

    Returns:
        ``{env_id: episodes written}``.

    Raises:
        ValueError: see :func:`oracle_episodes`; FileExistsError: ``out`` exists.
    """
    path = Path(out)
    if path.exists():
        raise FileExistsError(f"{path} exists; remove it or choose another --out")
    path.parent.mkdir(parents=True, exist_ok=True)
    seeds = list(seeds)
    counts: dict[str, int] = {}
    tmp = path.with_name(path.name + ".partial")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            for env_id in env_ids:
                counts[env_id] = 0
                for record in oracle_episodes(
                    env_id, seeds, env_kwargs, only_success=only_success, epsilon=epsilon
                ):
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                    counts[env_id] += 1
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # an export that failed part way leaves no half file
    return counts
