"""Sample episodes of each training step as readable text (``out_dir/samples/step_<step>.txt``).

So that a user sees what the policy writes (its reasoning and answer per turn, the reward, whether
the action was valid) without running an evaluation. Which episodes: the best and the worst return
of the step first, then the first episode of each further group, up to ``count``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from baselines.checkpoint import write_text_durable

__all__ = ["pick_samples", "format_episode", "write_samples"]


def pick_samples(episodes: list[Any], count: int) -> list[int]:
    """Indices of up to ``count`` episodes: highest return, lowest return, then one per group."""
    if count <= 0 or not episodes:
        return []
    order = sorted(range(len(episodes)), key=lambda i: (-episodes[i].total_reward, i))
    chosen = [order[0], order[-1]]
    seen_groups = {episodes[i].group for i in chosen}
    for i, episode in enumerate(episodes):
        if episode.group not in seen_groups:
            chosen.append(i)
            seen_groups.add(episode.group)
    return list(dict.fromkeys(chosen))[:count]


def format_episode(step: int, index: int, episode: Any, with_instructions: bool) -> str:
    """One episode as text: each observation, the policy's reply, and the turn's outcome."""
    turns = episode.turns
    head = (
        f"=== step {step} · episode {index} (group {episode.group}, seed {episode.seed}) · "
        f"return {episode.total_reward:.3f} · success {episode.success} · {len(turns)} turn(s)"
    )
    lines = [head]
    messages = episode.chat.messages()
    turn = 0
    for message in messages:
        role, content = message["role"], message["content"]
        if role == "system":
            if with_instructions:
                lines += ["--- instructions (system prompt)", content]
            continue
        if role == "user":
            lines += [f"--- turn {turn + 1}: observation", content]
            continue
        if role == "assistant" and turn < len(turns):
            t = turns[turn]
            lines += [f"--- turn {turn + 1}: policy ({len(t.sample.sampled_ids)} tokens)", t.action]
            valid = t.info.get("action_is_valid")
            reason = t.info.get("invalid_reason")
            outcome = f"reward {t.reward:.3f}, valid action {valid}"
            if reason and not valid:
                outcome += f" ({reason})"
            lines.append(f"--- turn {turn + 1}: {outcome}")
            turn += 1
    return "\n".join(lines) + "\n"


def write_samples(out_dir: str | Path, step: int, episodes: list[Any], count: int) -> Path | None:
    """Write up to ``count`` episodes of ``step`` to ``out_dir/samples/step_<step>.txt``."""
    picked = pick_samples(episodes, count)
    if not picked:
        return None
    folder = Path(out_dir) / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(
        format_episode(step, i, episodes[i], with_instructions=(n == 0))
        for n, i in enumerate(picked)
    )
    path = folder / f"step_{step:06d}.txt"
    write_text_durable(path, text)  # a new temp file renamed into place: never through a link
    return path
