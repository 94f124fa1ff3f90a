"""Chat-template rendering cost: in the caller (``apply_chat_template``) vs in a bounded worker.

For the embedded model's tokenizer (SmolLM2-135M-Instruct) and chats of 1, 5, 10 and 20 turns of
Sokoban-sized messages, times ``--rounds`` renders each way, alternating, so that both see the
same machine load: ``tokenizer.apply_chat_template(..., tokenize=False)`` in this process and
:func:`baselines.llm.chat_template.render_chat_template` (the same text from a worker under CPU,
memory and wall limits). Prints the median per render and the overhead, plus the first render's
wait for a worker to start (once per process), and one turn of the trainer's prompt path
(:meth:`baselines.llm.prompts.TokenContext.prompt`: render + tokenise the new part).

Usage::

    python benchmarks/bench_chat_template.py [--rounds 200]

Prints figures; asserts nothing. On a shared 2-core machine, expect noise between runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from transformers import AutoTokenizer

from baselines.llm.chat_template import close_template_workers, render_chat_template
from baselines.llm.policy import embedded_model_path
from baselines.llm.prompts import TokenContext

#: One user message of a Sokoban episode (about 300 characters), and a reply.
USER = (
    "Reward: -0.1\nTurn {t}:\nState:\n######\n#_P__#\n#_X__#\n#__O_#\n#____#\n######\n"
    "You have {left} actions left (up to 5 this turn)."
)
REPLY = "<think>The box is below me and the target is below it: push down twice.</think>"
REPLY += "<answer>Down || Down</answer>"


def chat(turns: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are solving Sokoban. " * 20}]
    for t in range(1, turns + 1):
        messages.append({"role": "user", "content": USER.format(t=t, left=100 - t)})
        if t < turns:
            messages.append({"role": "assistant", "content": REPLY})
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    tok = AutoTokenizer.from_pretrained(embedded_model_path())
    start = time.perf_counter()
    render_chat_template(tok, chat(1))
    print(f"first render (starts a worker, once per process): {time.perf_counter() - start:.2f} s")
    for turns in (1, 5, 10, 20):
        messages = chat(turns)
        size = len(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        here, bounded = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            t1 = time.perf_counter()
            render_chat_template(tok, messages, add_generation_prompt=True)
            t2 = time.perf_counter()
            here.append(t1 - t0)
            bounded.append(t2 - t1)
        a, b = statistics.median(here) * 1e3, statistics.median(bounded) * 1e3
        print(
            f"{turns:2d} turns ({size:6d} chars): in-process {a:.3f} ms, bounded worker "
            f"{b:.3f} ms, overhead {b - a:+.3f} ms per render"
        )
    # One episode of the trainer's prompt path: 20 turns, each a render and a partial tokenise.
    per_turn = []
    for _ in range(max(1, args.rounds // 20)):
        ctx = TokenContext(tok, "<think>")
        for turns in range(1, 21):
            t0 = time.perf_counter()
            ctx.prompt(chat(turns))
            per_turn.append(time.perf_counter() - t0)
    print(
        f"TokenContext.prompt over 20-turn episodes: median {statistics.median(per_turn) * 1e3:.3f}"
        " ms per turn (render + tokenise)"
    )
    close_template_workers()


if __name__ == "__main__":
    main()
