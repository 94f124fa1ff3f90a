"""``python -m baselines.show_rollouts RUN_DIR --step N``: print a step's episodes as text.

Reads ``RUN_DIR/rollouts/step_NNNNNN.jsonl`` (written with ``train.dump_rollouts: true``, format in
:func:`baselines.episodes.episode_json`) and the tokenizer saved next to it, and prints each
episode's training rows decoded, with the trained spans (the ids the policy sampled) between
``[[`` and ``]]`` (or in colour with ``--color``), followed by each turn's reward and mean
sampling log-prob.

Every field printed comes from the dump (the policy's replies, the observations, anything a
dump file holds) and is made inert first (:func:`inert`): control characters other than newline
and tab, ESC and the C1 controls included, print as ``\\x1b``-style text, so no dump can move
the cursor, retitle the window or rewrite the screen. Numbers that are not numbers print the same
way. The only escapes printed are ``--color``'s own.

Example:
    python -m baselines.show_rollouts runs/quick --step 0 --episodes 2
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["load_step", "inert", "format_episode", "main"]

_OPEN, _CLOSE = "[[", "]]"
_GREEN, _RESET = "\033[32m", "\033[0m"
#: C0 controls but newline and tab, DEL, and the C1 controls (U+0080-U+009F: CSI, OSC...).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(value: Any) -> str:
    """``str(value)`` with every control character but newline and tab written as ``\\xNN``.

    Example:
        >>> inert("a\\x1b[2Jb\\tc\\u009b")
        'a\\\\x1b[2Jb\\tc\\\\x9b'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def _number(value: Any, spec: str) -> str:
    """``value`` formatted with ``spec`` when it is a number, else :func:`inert` of it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return format(value, spec)
    return inert(value)


def load_step(run_dir: str | Path, step: int) -> list[dict[str, Any]]:
    """The episodes of ``step`` (one dict per line of its dump).

    Raises:
        FileNotFoundError: no dump for that step (the message lists the steps there are).
    """
    folder = Path(run_dir) / "rollouts"
    path = folder / f"step_{step:06d}.jsonl"
    if not path.is_file():
        have = sorted(int(p.stem.split("_")[1]) for p in folder.glob("step_*.jsonl"))
        raise FileNotFoundError(
            f"no rollout dump {path}; steps dumped: {have or 'none'} (train with "
            "train.dump_rollouts=true to write them)"
        )
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def format_episode(tokenizer: Any, episode: dict[str, Any], color: bool = False) -> str:
    """An episode as text: header, each training row with trained spans marked, turn summary."""
    opening, closing = (_GREEN, _RESET) if color else (_OPEN, _CLOSE)
    lines = [
        f"=== {inert(episode['env_id'])} seed={inert(episode['seed'])} "
        f"group={inert(episode['group'])} reward={_number(episode['reward'], 'g')} "
        f"success={inert(episode['success'])} turns={len(episode['turns'])}"
    ]
    for r, (ids, mask) in enumerate(zip(episode["input_ids"], episode["loss_mask"], strict=True)):
        lines.append(f"--- row {r}: {len(ids)} tokens, {sum(mask)} trained")
        pieces, start = [], 0
        for k in range(1, len(ids) + 1):
            if k == len(ids) or mask[k] != mask[start]:
                text = inert(tokenizer.decode(ids[start:k], skip_special_tokens=False))
                pieces.append(f"{opening}{text}{closing}" if mask[start] else text)
                start = k
        lines.append("".join(pieces))
    for t, turn in enumerate(episode["turns"]):
        lps = turn["logprobs"]
        mean = sum(lps) / len(lps) if lps else float("nan")
        lines.append(
            f"turn {t + 1}: reward={_number(turn['reward'], 'g')} "
            f"sampled={len(turn['sampled_ids'])} mean_logprob={_number(mean, '.3f')} "
            f"ended_with_eos={inert(turn['ended_with_eos'])} row={inert(turn['row'])}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.show_rollouts", description=__doc__)
    parser.add_argument("run_dir", help="the run folder (train.out_dir)")
    parser.add_argument("--step", type=int, required=True, help="training step to show")
    parser.add_argument("--episodes", type=int, default=0, help="show the first K (0: all)")
    parser.add_argument("--color", action="store_true", help="trained spans in green")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    try:
        episodes = load_step(args.run_dir, args.step)
    except FileNotFoundError as err:
        print(err, file=sys.stderr)
        return 2
    tokenizer = AutoTokenizer.from_pretrained(Path(args.run_dir) / "rollouts" / "tokenizer")
    if args.episodes:
        episodes = episodes[: args.episodes]
    for episode in episodes:
        print(format_episode(tokenizer, episode, color=args.color))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
