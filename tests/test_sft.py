"""Supervised warm start: export-sft data, the assistant-only loss mask, and a tiny-model run.

The tiny run shows the point of the warm start (issue 13): under a random-init model the oracle's
reasonings carry no information about their prompt (MI ~ 0), under the fine-tuned one nearly the
ceiling H(prompt), and the RL trainer starts from the checkpoint.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch

from agentgym.cli import main as agentgym_main
from agentgym.sft import NOISE_SEED_SALT, SFT_SEED_START, oracle_episodes
from baselines.checkpoint import SymlinkInRunFolder
from baselines.collapse import mi_metrics, mi_pairs, score_matrix
from baselines.config import load_config
from baselines.episodes import collect_rollouts
from baselines.llm.engines import SamplingSettings
from baselines.llm.policy import build_tiny_policy, load_policy
from baselines.llm.prompts import render_prompt
from baselines.sft import (
    IGNORE,
    SFTExample,
    accumulate_gradients,
    build_examples,
    collate,
    load_sft_config,
    read_chats,
    target_nll,
    train_sft,
)
from tests.helpers import FakeEngine, assert_records_this_code

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- export


def test_bandit_reasoning_names_both_arms_and_the_choice():
    (record,) = oracle_episodes("agentgym/Bandit-v0", [0])
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system", "user", "assistant"]
    user, reply = record["messages"][1]["content"], record["messages"][2]["content"]
    # Seed 0 shows "Arm 1: Nurse", "Arm 2: Stuntman"; the oracle pulls the risky Stuntman.
    assert "Arm 1: Nurse" in user and "Arm 2: Stuntman" in user
    assert reply == (
        "<think>The arms are Nurse and Stuntman. Stuntman sounds like the arm with the higher "
        "expected reward, Nurse like the safe small one, so I pull Stuntman.</think>"
        "<answer>Stuntman</answer>"
    )
    assert record["success"] and record["return"] == 1.0


def test_bandit_reasoning_when_the_safe_arm_is_better():
    # high_arm_prob=0.05: E[risky] = 0.05 < E[safe] = 0.15, so the oracle pulls the safe Nurse.
    (record,) = oracle_episodes("agentgym/Bandit-v0", [0], {"high_arm_prob": 0.05})
    assert record["messages"][2]["content"] == (
        "<think>The arms are Nurse and Stuntman. Nurse sounds like the safe arm, Stuntman like "
        "the risky one; here the safe arm's expected reward is at least the risky one's, so I "
        "pull Nurse.</think><answer>Nurse</answer>"
    )
    assert record["success"] and record["return"] == 0.15


def test_frozen_lake_reasoning_names_position_goal_and_plan():
    (record,) = oracle_episodes("agentgym/FrozenLake-v0", [0])
    first = record["messages"][2]["content"]
    # The first observation says "Player position: row 0, column 1"; the goal G is row 3, col 1.
    assert first.startswith("<think>I am at row 0, column 1; the goal is at row 3, column 1.")
    assert first.endswith("</think><answer>Right || Down || Right</answer>")
    assert record["success"]


def test_countdown_reasoning_names_numbers_target_and_expression():
    import gymnasium

    env = gymnasium.make("agentgym/Countdown-v0")
    env.reset(seed=0)
    text = env.unwrapped.oracle_reasoning(env.unwrapped.oracle_actions())
    assert text == "The numbers are [86, 64, 52, 27] and the target is 3. 52 - (86 + 27 - 64) = 3."
    env.close()


# Exported records: the first export-sft writes (seed SFT_SEED_START), for FrozenLake the first
# with two turns (SFT_SEED_START + 3). Each reply was checked by hand against the observation
# before it:
# - Bandit: arms Teacher (the pair's safe name) and Explorer (its risky one); at the default
#   settings the risky arm is best, E = 0.25 * 1.0 > 0.15; this pull paid 0.
# - FrozenLake: P at row 2, column 0, G at row 2, column 2, a hole between them at column 1 and
#   one above P: the shortest path is Down, Right, Right, Up (3 moves a turn), reward 1 at G.
# - Sokoban, one move a turn: P (4, 1), box (2, 2), target (1, 2): Up, Right, then Up pushes
#   the box onto the target: -0.1 - 0.1 + (-0.1 + 1 + 10) = 10.7.
# - Countdown: 38 + 28 - 12 + 33 = 87.
HAND_CHECKED = {
    "agentgym/Bandit-v0": (
        0,
        {},
        ["Arm 1: Teacher\nArm 2: Explorer\n"],
        [
            "<think>The arms are Teacher and Explorer. Explorer sounds like the arm with the "
            "higher expected reward, Teacher like the safe small one, so I pull Explorer."
            "</think><answer>Explorer</answer>"
        ],
        0.0,
    ),
    "agentgym/FrozenLake-v0": (
        3,
        {},
        [
            "_ _ _ _\nO _ _ _\nP O G _\n_ _ _ _\nPlayer position: row 2, column 0 ",
            "Reward: 0\nTurn 2:\nState:\n_ _ _ _\nO _ _ _\n_ O G _\n_ _ P _\n"
            "Player position: row 3, column 2 ",
        ],
        [
            "<think>I am at row 2, column 0; the goal is at row 2, column 2. Avoiding the holes, "
            "I move Down, Right, Right.</think><answer>Down || Right || Right</answer>",
            "<think>I am at row 3, column 2; the goal is at row 2, column 2. Avoiding the holes, "
            "I move Up.</think><answer>Up</answer>",
        ],
        1.0,
    ),
    "agentgym/Sokoban-v0": (
        0,
        {"max_actions_per_turn": 1},
        [
            "#_O_##\n#_X_##\n#____#\n#P___#\n",
            "Reward: -0.1\nTurn 2:\nState:\n######\n#_O_##\n#_X_##\n#P___#\n",
            "Reward: -0.1\nTurn 3:\nState:\n######\n#_O_##\n#_X_##\n#_P__#\n",
        ],
        [
            f"<think>I am at {player}; boxes at [(2, 2)], targets at [(1, 2)]. The shortest plan "
            f"that pushes every box onto a target starts {move}.</think><answer>{move}</answer>"
            for player, move in [("(4, 1)", "Up"), ("(3, 1)", "Right"), ("(3, 2)", "Up")]
        ],
        10.7,
    ),
    "agentgym/Countdown-v0": (
        0,
        {},
        ["Numbers: [12, 28, 38, 33]\nTarget: 87\n"],
        [
            "<think>The numbers are [12, 28, 38, 33] and the target is 87. 38 + 28 - 12 + 33 = 87."
            "</think><answer>38 + 28 - 12 + 33</answer>"
        ],
        1.0,
    ),
}


@pytest.mark.parametrize("env_id", sorted(HAND_CHECKED))
def test_exported_record_equals_the_hand_checked_chat(env_id):
    offset, kwargs, observed, replies, total = HAND_CHECKED[env_id]
    seed = SFT_SEED_START + offset
    (record,) = oracle_episodes(env_id, [seed], kwargs)
    assert {k: v for k, v in record.items() if k != "messages"} == {
        "env_id": env_id,
        "env_kwargs": kwargs,
        "seed": seed,
        "return": pytest.approx(total),
        "success": True,
    }
    messages = record["messages"]
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * len(replies)
    for fact, user in zip(observed, messages[1::2], strict=True):
        assert fact in user["content"]
    assert [m["content"] for m in messages[2::2]] == replies


def test_an_episode_the_oracle_cannot_move_in_is_not_a_demonstration(tmp_path):
    # A box in a corner off its target: the oracle has no move (END_EPISODE), nothing is written.
    level = tmp_path / "stuck.xsb"
    level.write_text("######\n#$  .#\n#  @ #\n######\n")
    kwargs = {"level_file": str(level)}
    assert list(oracle_episodes("agentgym/Sokoban-v0", [0, 1], kwargs, only_success=False)) == []


def test_oracle_reasoning_defaults_to_the_plan_and_needs_a_reset():
    import gymnasium

    env = gymnasium.make("agentgym/MathArithmetic-v0").unwrapped
    with pytest.raises(RuntimeError, match=r"call reset\(\) before oracle_reasoning\(\)"):
        env.oracle_reasoning(["1"])
    env.reset(seed=0)
    answer = env.oracle_actions()
    assert env.oracle_reasoning(answer) == f"The plan for this turn: {answer[0]}."
    env.close()


def test_a_noisy_oracle_plays_the_draws_of_its_seeded_generator():
    """epsilon 1 on Bandit (one pull): every episode pulls the arm drawn by
    ``default_rng([NOISE_SEED_SALT, seed])`` (one ``random()`` for the coin, then ``integers(2)``),
    reasons about the arm it pulled, and succeeds exactly when that is the oracle's arm."""
    import gymnasium
    import numpy as np

    seeds = list(range(SFT_SEED_START, SFT_SEED_START + 40))
    records = list(oracle_episodes("agentgym/Bandit-v0", seeds, epsilon=1.0))
    assert [r["seed"] for r in records] == seeds and all(r["epsilon"] == 1.0 for r in records)
    env = gymnasium.make("agentgym/Bandit-v0").unwrapped
    hits = 0
    for record in records:
        env.reset(seed=record["seed"])
        rng = np.random.default_rng([NOISE_SEED_SALT, record["seed"]])
        assert rng.random() < 1.0
        arm = env.valid_actions()[int(rng.integers(2))]
        assert record["messages"][-1]["content"] == (
            f"<think>{env.oracle_reasoning([arm])}</think><answer>{arm}</answer>"
        )
        best = arm == env.oracle_actions()[0]
        assert record["success"] is best
        hits += best
    env.close()
    assert 0 < hits < len(seeds)  # both arms were drawn: the noise is not a constant
    # epsilon 0 is the oracle, and its records carry no "epsilon".
    (plain,) = oracle_episodes("agentgym/Bandit-v0", seeds[:1])
    assert "epsilon" not in plain and plain["success"] is True


def test_a_noisy_oracle_refuses_what_it_cannot_draw_from(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"epsilon: a probability in \[0, 1\]"):
        list(oracle_episodes("agentgym/Bandit-v0", [0], epsilon=1.5))
    # Countdown's answers are expressions: no finite list of valid actions to draw from.
    with pytest.raises(ValueError, match="valid_actions.*export with epsilon 0"):
        list(oracle_episodes("agentgym/Countdown-v0", [0], epsilon=1.0))
    out = tmp_path / "n.jsonl"
    args = ["export-sft", "--env", "Bandit-v0", "--episodes", "1", "--out", str(out)]
    assert agentgym_main([*args, "--epsilon", "-0.1"]) == 2
    assert "epsilon" in capsys.readouterr().err and not out.exists()
    # An export that fails part way (Countdown after Bandit) leaves neither file nor half file.
    both = [*args[:3], "--env", "Countdown-v0", *args[3:], "--epsilon", "1"]
    assert agentgym_main(both) == 2
    assert "valid_actions" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_export_sft_cli(tmp_path, capsys):
    out = tmp_path / "d.jsonl"
    args = ["export-sft", "--env", "Bandit-v0", "--env", "Countdown-v0", "--episodes", "3"]
    assert agentgym_main([*args, "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # Default seeds: SFT_SEED_START onwards, apart from RL's training (0...) and validation
    # (rollout.val_seed = 1,000,000...) seeds.
    start = SFT_SEED_START
    assert start == 2_000_000 and start > load_config(None, []).rollout.val_seed + 10**5
    assert [(r["env_id"], r["seed"]) for r in records] == [
        ("agentgym/Bandit-v0", start),
        ("agentgym/Bandit-v0", start + 1),
        ("agentgym/Bandit-v0", start + 2),
        ("agentgym/Countdown-v0", start),
        ("agentgym/Countdown-v0", start + 1),
        ("agentgym/Countdown-v0", start + 2),
    ]
    # --seed-start (alias --seed) chooses the first seed.
    explicit = tmp_path / "s.jsonl"
    assert (
        agentgym_main([*args[:3], "--episodes", "2", "--seed-start", "7", "--out", str(explicit)])
        == 0
    )
    assert [json.loads(x)["seed"] for x in explicit.open()] == [7, 8]
    assert agentgym_main([*args, "--out", str(out)]) == 2  # never overwrites
    assert "exists" in capsys.readouterr().err
    bad = ["export-sft", "--env", "Bandit-v0", "--episodes", "1", "--kw", "action_format='raw'"]
    assert agentgym_main([*bad, "--out", str(tmp_path / "e.jsonl")]) == 2


# ---------------------------------------------------------------- examples and loss mask


@pytest.fixture(scope="module")
def frozen_chat():
    (record,) = oracle_episodes("agentgym/FrozenLake-v0", [0])
    return record["messages"]


@pytest.fixture(scope="module")
def tiny(frozen_chat):
    texts = [m["content"] for m in frozen_chat] + ["Reward Turn State You have actions left"]
    return build_tiny_policy(texts)


def test_loss_mask_covers_assistant_tokens_only(tiny, frozen_chat):
    _, tokenizer = tiny
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    examples = build_examples(tokenizer, frozen_chat, eot)
    assistant = [i for i, m in enumerate(frozen_chat) if m["role"] == "assistant"]
    assert len(examples) == len(assistant) >= 2
    first = render_prompt(tokenizer, frozen_chat[: assistant[0]], True)
    first_ids = tokenizer(first, add_special_tokens=False)["input_ids"]
    assert first.endswith("<|im_start|>assistant\n<think>")
    assert examples[0].input_ids[: len(first_ids)] == first_ids  # turn 1: the rendered prompt
    for example, index in zip(examples, assistant, strict=True):
        n = example.labels.count(IGNORE)
        # Every prompt id is masked, every reply id is a target.
        assert example.labels[:n] == [IGNORE] * n
        target = example.labels[n:]
        assert IGNORE not in target and target == example.input_ids[n:]
        # The reply without its "<think>", then the end of turn.
        reply = frozen_chat[index]["content"][len("<think>") :]
        assert target == tokenizer(reply, add_special_tokens=False)["input_ids"] + [eot]
        # No system or user word is ever a target.
        assert "Turn" not in tokenizer.decode(target) and "State" not in tokenizer.decode(target)


class _OracleReplay(FakeEngine):
    """A rollout engine that 'samples' the oracle's replies (teacher forcing), returning them as
    the transformers engine would: the reply's ids, cut after a stop string or ended by the end
    token (:func:`baselines.llm.engines.base._cut`)."""

    def __init__(self, tokenizer, replies, eot):
        self.tokenizer, self.replies, self.eot = tokenizer, list(replies), eot
        self.prompts: list[list[int]] = []

    def generate(self, prompt_ids, sampling):
        from baselines.llm.engines import Generation
        from baselines.llm.engines.base import _cut

        (prompt,) = prompt_ids
        self.prompts.append(list(prompt))
        reply = self.replies.pop(0)[len("<think>") :]
        ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"] + [self.eot]
        n, why = _cut(self.tokenizer, ids, {self.eot}, tuple(sampling.stop_strings))
        kept = ids[:n]
        text = self.tokenizer.decode(kept[:-1] if why == "end" else kept)
        return [Generation(kept, text, [0.0] * n, why == "end")]

    def sync_weights(self, model):
        return 0.0

    def close(self):
        pass


def test_sft_prompts_are_the_episode_loops_prompt_ids(tiny, frozen_chat):
    """Turn for turn, the SFT prompt ids are the ids the trainer's episode loop gives the engine
    on the same seed when the policy plays the oracle's replies."""
    model, tokenizer = tiny
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    replies = [m["content"] for m in frozen_chat if m["role"] == "assistant"]
    engine = _OracleReplay(tokenizer, replies, eot)
    (episode,) = collect_rollouts(
        model, tokenizer, "agentgym/FrozenLake-v0", [0], 1, SamplingSettings(), engine=engine
    )
    examples = build_examples(tokenizer, frozen_chat, eot)
    assert len(engine.prompts) == len(examples) == len(episode.turns) >= 2
    for turn, example, given in zip(episode.turns, examples, engine.prompts, strict=True):
        n = example.labels.count(IGNORE)
        assert example.input_ids[:n] == given == turn.sample.prompt_ids
        # The engine stops at "</answer>"; the target adds the end of turn after it.
        assert example.input_ids[n:] == turn.sample.sampled_ids + [eot]
    assert episode.success


def test_sft_prompts_match_the_episode_loop_with_smollm2s_tokenizer():
    """The same, with the shipped model's BPE tokenizer and chat template (multi-token tags,
    merges across the prompt/reply boundary) on a three-turn Sokoban chat."""
    from transformers import AutoTokenizer

    from baselines.llm.policy import embedded_model_path

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path())
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    kw = {"max_actions_per_turn": 1}
    (record,) = oracle_episodes("agentgym/Sokoban-v0", [0], kw)
    replies = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
    assert len(replies) == 3  # seed 0: Right, Up, Left
    engine = _OracleReplay(tokenizer, replies, eot)
    (episode,) = collect_rollouts(
        None, tokenizer, "agentgym/Sokoban-v0", [0], 1, SamplingSettings(), kw, engine=engine
    )
    examples = build_examples(tokenizer, record["messages"], eot)
    for turn, example, given in zip(episode.turns, examples, engine.prompts, strict=True):
        n = example.labels.count(IGNORE)
        assert example.input_ids[:n] == given == turn.sample.prompt_ids
        assert example.input_ids[n:] == turn.sample.sampled_ids + [eot]
    assert len(examples) == 3 and episode.success


def test_reply_without_think_is_refused(tiny):
    _, tokenizer = tiny
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<answer>Up"}]
    with pytest.raises(ValueError, match="does not start with '<think>'"):
        build_examples(tokenizer, chat, 2)
    (plain,) = build_examples(tokenizer, chat, 2, think_prefix=False)
    assert plain.labels[-1] == 2


def test_collate_and_target_nll_hand_values():
    a, b = [5, 6, 7], [8, 9]
    batch = collate([SFTExample(a, [IGNORE, 6, 7]), SFTExample(b, [IGNORE, 9])], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, 9, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[IGNORE, 6, 7], [IGNORE, 9, IGNORE]]
    # A model whose head (tied to the embedding) is all zeros has uniform logits over V: each of
    # the 3 target tokens costs log V.
    model, _ = build_tiny_policy(["w1 w2 w3 w4 w5 w6 w7 w8 w9"])
    with torch.no_grad():
        model.get_output_embeddings().weight.zero_()
    with torch.no_grad():
        nll, count = target_nll(model, batch)
    vocab = model.config.vocab_size
    assert count == 3 and float(nll) == pytest.approx(3 * math.log(vocab), rel=1e-6)


def _frozen_examples(tiny, chat):
    _, tokenizer = tiny
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return build_examples(tokenizer, chat, eot)


def test_target_nll_equals_the_full_logits_cross_entropy(tiny, frozen_chat):
    """float32: the loss from the target positions only equals the old full [B, L, V] path."""
    model, tokenizer = tiny
    examples = _frozen_examples(tiny, frozen_chat)
    batch = collate(examples, tokenizer.pad_token_id)
    with torch.no_grad():
        nll, count = target_nll(model, batch)
        logits = model(**{k: batch[k] for k in ("input_ids", "attention_mask")}).logits
    labels = batch["labels"][:, 1:]
    full = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=IGNORE,
        reduction="sum",
    )
    assert count == int((labels != IGNORE).sum()) > 20
    assert float(nll / count) == pytest.approx(float(full / count), abs=1e-5)


def test_micro_batches_give_the_one_big_batch_gradient(tiny, frozen_chat):
    """Gradient accumulation over one-row micro-batches equals one micro-batch of the whole step."""
    model, tokenizer = tiny
    examples = _frozen_examples(tiny, frozen_chat) * 2  # rows of different lengths
    grads, results = [], []
    for budget in (10**6, 1):
        model.zero_grad(set_to_none=True)
        results.append(accumulate_gradients(model, examples, tokenizer.pad_token_id, budget))
        grads.append([p.grad.clone() for p in model.parameters()])
    (loss_one, tokens_one, micro_one), (loss_many, tokens_many, micro_many) = results
    assert (micro_one, micro_many) == (1, len(examples)) and tokens_one == tokens_many
    assert loss_many == pytest.approx(loss_one, rel=1e-6)
    for one, many in zip(*grads, strict=True):
        torch.testing.assert_close(many, one, rtol=1e-5, atol=1e-7)
    model.zero_grad(set_to_none=True)


def test_sft_config_errors_name_the_key(tmp_path):
    with pytest.raises(ValueError, match="sft.data"):
        load_sft_config(None, [])
    with pytest.raises(ValueError, match="sft.epochs"):
        load_sft_config(None, ["sft.data=x.jsonl", "sft.epochs=0"])
    with pytest.raises(ValueError, match="unknown key"):
        load_sft_config(None, ["sft.data=x.jsonl", "sft.epoch=1"])
    config = load_sft_config(REPO / "baselines" / "configs" / "sft" / "bandit.yaml", [])
    assert config.model.path == "embedded" and config.sft.think_prefix
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"no": "messages"}\n')
    with pytest.raises(ValueError, match="not an export-sft record"):
        read_chats(str(bad))


# ---------------------------------------------------------------- leave it running: save, resume


def _bandit_data(tmp_path, episodes: int) -> Path:
    data = tmp_path / "bandit.jsonl"
    args = ["export-sft", "--env", "Bandit-v0", "--episodes", str(episodes), "--out", str(data)]
    assert agentgym_main(args) == 0
    return data


def _tiny_config(data, out, *extra):
    return [
        "model.path=tiny",
        f"sft.data={data}",
        f"sft.out_dir={out}",
        "sft.lr=0.01",
        "sft.epochs=3",
        "sft.batch_size=4",
        "sft.micro_batch_tokens=200",  # two or three micro-batches per step
        "sft.threads=1",
        *extra,
    ]


def _lines(out):
    rows = [json.loads(x) for x in (out / "metrics.jsonl").open()]
    return [{k: v for k, v in r.items() if k != "timing/step_s"} for r in rows]


def _weights(out):
    from safetensors.torch import load_file

    return load_file(str(out / "checkpoint" / "model.safetensors"))


def test_a_stopped_or_killed_run_resumes_exactly(tmp_path):
    """10 examples in steps of 4 (3 steps an epoch, 9 in all). A run stopped after step 5
    (sft.max_steps) and one SIGKILLed after step 4's metrics line (its last checkpoint: step 2)
    both end, with --resume, with the weights and metrics lines of an uninterrupted run."""
    import subprocess
    import sys

    from safetensors.torch import load_file

    data = _bandit_data(tmp_path, 10)
    whole = tmp_path / "whole"
    final = train_sft(load_sft_config(None, _tiny_config(data, whole)), progress=False)
    assert final["sft/examples"] == 10 and final["step"] == 9
    expected, weights = _lines(whole), _weights(whole)
    assert [r["step"] for r in expected] == list(range(1, 10))
    assert max(r["sft/micro_batches"] for r in expected) >= 2
    state = json.loads((whole / "checkpoint" / "state.json").read_text())
    assert state["finished"] and (state["step"], state["epoch"], state["index"]) == (8, 3, 0)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "optimizer.pt"):
        assert (whole / "checkpoint" / name).is_file()

    # Stopped after 5 steps (position: epoch 1, example 8), then resumed to the end.
    part = tmp_path / "part"
    train_sft(load_sft_config(None, _tiny_config(data, part, "sft.max_steps=5")), progress=False)
    state = json.loads((part / "checkpoint" / "state.json").read_text())
    assert (state["step"], state["epoch"], state["index"], state["finished"]) == (4, 1, 8, False)
    with pytest.raises(FileExistsError, match="--resume"):
        train_sft(load_sft_config(None, _tiny_config(data, part)), progress=False)
    with pytest.raises(ValueError, match="sft.lr"):
        train_sft(load_sft_config(None, _tiny_config(data, part, "sft.lr=0.02")), resume=True)
    train_sft(load_sft_config(None, _tiny_config(data, part)), progress=False, resume=True)
    assert _lines(part) == expected
    # The run and its resume each record the code that ran them.
    record = json.loads((part / "provenance.json").read_text())
    assert len(record["resumed"]) == 1 and "resumed" not in record["resumed"][0]
    for session in (record, *record["resumed"]):
        assert_records_this_code(session)
    for name, tensor in _weights(part).items():
        assert torch.equal(tensor, weights[name]), name

    # Killed (SIGKILL) right after step 4's metrics line; checkpoints every 2 steps.
    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "baselines.sft", "--quiet"]
    command += _tiny_config(data, killed, "sft.save_every=2")
    env = {**os.environ, "AGENTGYM_CRASH_AT": "metrics_appended@4", "PYTHONPATH": str(REPO)}
    assert subprocess.run(command, env=env, cwd=REPO).returncode == -9
    assert len(_lines(killed)) == 4
    assert json.loads((killed / "checkpoint" / "state.json").read_text())["step"] == 1
    env.pop("AGENTGYM_CRASH_AT")
    # Resumed without repeating the settings: the run's saved config.yaml gives them.
    resume = [sys.executable, "-m", "baselines.sft", "--quiet", "--resume", f"sft.out_dir={killed}"]
    assert subprocess.run(resume, env=env, cwd=REPO).returncode == 0
    assert _lines(killed) == expected  # steps 3 and 4 ran again, their first lines dropped
    resumed = load_file(str(killed / "checkpoint" / "model.safetensors"))
    for name, tensor in resumed.items():
        assert torch.equal(tensor, weights[name]), name


def test_resume_needs_a_run_and_a_finished_run_has_nothing_left(tmp_path):
    data = _bandit_data(tmp_path, 4)
    out = tmp_path / "sft"
    with pytest.raises(FileNotFoundError, match="without --resume"):
        train_sft(load_sft_config(None, _tiny_config(data, out)), resume=True)
    config = load_sft_config(None, _tiny_config(data, out, "sft.epochs=1"))
    first = train_sft(config, progress=False)
    again = train_sft(config, progress=False, resume=True)
    assert again["step"] == first["step"] == 1 and again["sft/loss"] == first["sft/loss"]
    # More epochs on --resume extend the run.
    more = load_sft_config(None, _tiny_config(data, out, "sft.epochs=2"))
    assert train_sft(more, progress=False, resume=True)["step"] == 2


def test_resume_into_a_folder_with_planted_links_is_refused(tmp_path):
    """``python -m baselines.sft --resume`` on a prepared run folder: links at the config and
    metrics temp paths, pointing at files outside. Before, the resumed run wrote its config and
    rewritten metrics into them; now it stops at once, naming the first link."""
    import subprocess
    import sys

    data = _bandit_data(tmp_path, 4)
    out = tmp_path / "sft"
    train_sft(load_sft_config(None, _tiny_config(data, out, "sft.max_steps=1")), progress=False)
    victims = [tmp_path / "v1.txt", tmp_path / "v2.txt"]
    for link, victim in zip([".config.yaml.tmp", ".metrics.jsonl.tmp"], victims, strict=True):
        victim.write_text("the victim's own text\n")
        (out / link).symlink_to(victim)
    resume = [sys.executable, "-m", "baselines.sft", "--quiet", "--resume", f"sft.out_dir={out}"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(resume, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(
        f"baselines.sft: error: {out}/.config.yaml.tmp is a symbolic link (to "
        f"'{tmp_path}/v1.txt'): the run would write through it;"
    ), done.stderr[-2000:]
    with pytest.raises(SymlinkInRunFolder, match=r"\.config\.yaml\.tmp is a symbolic link"):
        train_sft(load_sft_config(None, _tiny_config(data, out)), progress=False, resume=True)
    assert [v.read_text() for v in victims] == ["the victim's own text\n"] * 2


# ---------------------------------------------------------------- the tiny warm start


def _oracle_mi(model, tokenizer, records) -> dict[str, float]:
    """MI of the oracle's reasonings under ``model``, as the trainer's diagnostics score them."""
    prompts = [render_prompt(tokenizer, r["messages"][:2], True) for r in records]
    replies = [r["messages"][2]["content"] for r in records]
    distinct, zs, index, _ = mi_pairs(prompts, replies)
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in distinct]
    z_ids = [tokenizer(z, add_special_tokens=False)["input_ids"] for z in zs]
    loglik = score_matrix(model, prompt_ids, z_ids)
    return mi_metrics(loglik, index, lengths=torch.tensor([len(z) for z in z_ids]))


def _one_rl_step(config, checkpoint, out, new_tokens: int, *extra: str) -> dict:
    """One tiny RL step from an SFT checkpoint; its metrics."""
    from baselines.trainer import Trainer

    rl = load_config(
        config,
        [
            f"model.path={checkpoint}",
            *extra,
            "rollout.num_groups=2",
            "rollout.group_size=2",
            f"rollout.max_new_tokens={new_tokens}",
            "rollout.val_episodes=0",
            "diagnostics.every=0",
            "train.steps=1",
            "train.threads=1",
            f"train.out_dir={out}",
        ],
    )
    (metrics,) = Trainer(rl, progress=False).run()
    return metrics


def test_tiny_warm_start_reaches_the_mi_ceiling_and_rl_loads_it(tmp_path):
    data = tmp_path / "bandit.jsonl"
    assert (
        agentgym_main(["export-sft", "--env", "Bandit-v0", "--episodes", "32", "--out", str(data)])
        == 0
    )
    config = load_sft_config(
        None,
        [
            "model.path=tiny",
            f"sft.data={data}",
            f"sft.out_dir={tmp_path / 'sft'}",
            "sft.lr=0.003",
            "sft.epochs=100",
            "sft.batch_size=16",
            "sft.threads=1",
        ],
    )
    final = train_sft(config, progress=False)
    losses = [json.loads(x)["sft/loss"] for x in (tmp_path / "sft" / "metrics.jsonl").open()]
    assert len(losses) == 200 and final["sft/examples"] == 32
    # lr 0.01 (an earlier setting) stalled at a loss of 0.21 with MI 49-75 % of the ceiling and
    # retrieval 0.31-0.81, moved by float rounding alone (micro-batch packing, bf16 or not).
    # lr 0.003 for 200 steps: measured 4.7 -> 0.007 (float32), MI at the ceiling, retrieval 1.0.
    assert losses[-1] < 0.2 * losses[0]

    records = [json.loads(x) for x in data.open()]
    tuned, tokenizer = load_policy(str(tmp_path / "sft" / "checkpoint"), device="cpu")
    after = _oracle_mi(tuned, tokenizer, records)
    before = _oracle_mi(build_tiny_policy(_texts(records))[0], tokenizer, records)
    # Random init: no dependence (observed -0.001 nats). Tuned: measured MI at its ceiling of
    # 2.28 nats and retrieval 1.0 against chance 0.19: both bounds 3x and 2.7x below that.
    assert abs(before["mi_estimate"]) < 0.05 * before["mi_upper_bound"]
    assert after["mi_estimate"] > 0.3 * after["mi_upper_bound"]
    assert after["retrieval_accuracy"] > 2 * after["retrieval_chance"]

    # The RL trainer starts from the checkpoint (one tiny step).
    metrics = _one_rl_step(
        None, tmp_path / "sft" / "checkpoint", tmp_path / "rl", 48,
        "rollout.env_id=agentgym/Bandit-v0",
    )  # fmt: skip
    assert metrics["rollout/valid_action_rate"] > 0  # the tuned model answers in format


def _texts(records):
    from baselines.sft import _vocabulary

    return _vocabulary([r["messages"] for r in records])


# ---------------------------------------------------------------- the multi-turn recipe (README)

SOKOBAN_KW = {"max_turns": 2, "max_actions_per_turn": 1}


def test_sokoban_recipe_runs_end_to_end_and_the_sft_loss_falls(tmp_path, capsys):
    """The README's recipe at test size: export-sft (short id), baselines.sft with the shipped
    config, then the RL trainer from the checkpoint with the shipped sokoban.yaml.

    What a model learns moves with dependency numerics (a transformers upgrade took the tuned
    model's greedy valid-action rate from 1.0 to 0.75; issue 26), so this test asserts no
    learning threshold except one with a measured wide margin: the training loss falls far."""
    from baselines.sft import main as sft_main

    data = tmp_path / "sokoban.jsonl"
    export = ["export-sft", "--env", "Sokoban-v0", "--episodes", "24", "--keep-failures"]
    export += ["--kw", "max_turns=2", "--kw", "max_actions_per_turn=1", "--out", str(data)]
    assert agentgym_main(export) == 0
    records = [json.loads(x) for x in data.open()]
    assert len(records) == 24 and records[0]["env_id"] == "agentgym/Sokoban-v0"

    out = tmp_path / "sft"
    config = REPO / "baselines" / "configs" / "sft" / "sokoban.yaml"
    overrides = ["model.path=tiny", f"sft.data={data}", f"sft.out_dir={out}", "sft.lr=0.01"]
    overrides += ["sft.epochs=16", "sft.threads=1"]
    assert sft_main(["--config", str(config), "--quiet", *overrides]) == 0
    assert "checkpoint" in capsys.readouterr().out
    losses = [json.loads(x)["sft/loss"] for x in (out / "metrics.jsonl").open()]
    assert len(losses) == 96  # 16 epochs of 48 examples (2 turns x 24) in steps of 8
    # Measured: 5.29 at the first step (about log V of a near-uniform random init), every step
    # of the last epoch at most 0.26 (model.dtype=float32) or 0.28 (bf16 autocast): a ratio of
    # 0.05, five times below the bound.
    assert max(losses[-6:]) < 0.25 * losses[0]

    metrics = _one_rl_step(
        REPO / "baselines" / "configs" / "sokoban.yaml", out / "checkpoint", tmp_path / "rl", 64,
        f"rollout.env_kwargs={json.dumps(SOKOBAN_KW)}",
    )  # fmt: skip
    # The trainer samples the tuned policy: measured 0.625 of the turns valid; the random-init
    # tiny model writes none (it repeats "<think>").
    assert metrics["rollout/valid_action_rate"] > 0
