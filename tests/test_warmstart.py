"""The supervised warm start: oracle episodes teach a policy that never acted validly to act."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from baselines.policy import load_policy
from baselines.rollout import SamplingSettings, collect_rollouts
from baselines.trainer import Trainer, vocabulary_texts
from baselines.warmstart import main, oracle_examples, warm_start

ENV = "agentgym/Sokoban-v0"
KW = {"action_format": "raw", "max_turns": 3, "max_actions_per_turn": 1}


def _valid_rate(model, tokenizer) -> float:
    torch.manual_seed(0)
    episodes = collect_rollouts(
        model,
        tokenizer,
        ENV,
        list(range(100, 106)),
        1,
        SamplingSettings(max_new_tokens=4, temperature=0.0, think_prefix=False),
        env_kwargs=KW,
    )
    return Trainer.rollout_metrics(episodes, "x/")["x/valid_action_rate"]


def test_warm_start_teaches_valid_actions() -> None:
    torch.manual_seed(0)
    texts = vocabulary_texts(ENV, KW, range(32))
    model, tokenizer = load_policy("tiny", device="cpu", dtype="float32", texts=texts, seed=0)
    before = _valid_rate(model, tokenizer)
    examples = oracle_examples(ENV, KW, range(16), tokenizer, think_prefix=False)
    assert len(examples) >= 16  # at least one turn per episode
    # Prompt tokens are the trainer's rendering; the target is one action and the end of turn.
    assert examples[0][1][-1] == tokenizer.eos_token_id
    losses = warm_start(model, examples, epochs=6, lr=3e-3, batch_size=8)
    assert losses[-1] < losses[0]
    after = _valid_rate(model, tokenizer)
    assert before < 0.5 and after >= 0.9, (before, after)


def test_warm_start_cli_writes_a_checkpoint_the_trainer_loads(tmp_path: Path, capsys) -> None:
    out = tmp_path / "warm"
    argv = ["--env", "Sokoban-v0", "--model", "tiny", "--episodes", "2", "--epochs", "1"]
    argv += ["--no-think-prefix", "--threads", "1", "--out", str(out)]
    argv += [f"--kw={k}={v}" for k, v in KW.items()]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    assert json.loads(printed[0])["examples"] >= 2
    model, tokenizer = load_policy(str(out), device="cpu", dtype="float32")
    assert tokenizer.eos_token_id is not None and model.config.vocab_size > 0
