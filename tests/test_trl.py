"""agentgym environments under Hugging Face TRL's GRPOTrainer (two real steps, tiny model, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from baselines.integrations.trl import AgentgymRollout, episode_return
from baselines.policy import load_policy
from baselines.trainer import vocabulary_texts
from tests.helpers import cpu_grpo_config


# Settings under which the random tiny model's rewards differ within a group, so that GRPO's
# advantages are nonzero and a step must move the weights. Bandit: a 4-token raw reply sometimes
# names an arm (0.15 or 0/1) instead of the -0.1 format penalty. Sokoban: a 1-token raw reply is
# sometimes a move word (Up, L, ...); a valid move costs -0.1, the same as the default format
# penalty, so the penalty is set to -1.0 to tell a valid turn (-0.1) from an invalid one (-1.0).
# 8 generations per prompt make a group with a valid reply likely; the run is seeded, so it is
# deterministic. Measured (seed 0, twice, identical): Sokoban returns -1.1 (one valid turn) vs -2.0
# for 1 of 16 episodes in step 1 and 4 of 16 in step 2 (reward_std 0.225, 0.402); Bandit 0.15 and
# 1.0 vs -0.1 for 2 of 16 in step 1 (reward_std 0.278); largest weight change 0.015 in both.
@pytest.mark.parametrize(
    ("env_id", "env_kwargs", "max_new_tokens"),
    [
        ("Bandit-v0", {"action_format": "raw"}, 4),
        ("Sokoban-v0", {"action_format": "raw", "max_turns": 2, "format_penalty": -1.0}, 1),
    ],
)
def test_two_grpo_trainer_steps(
    tmp_path: Path, env_id: str, env_kwargs: dict, max_new_tokens: int
) -> None:
    from trl import GRPOTrainer

    torch.manual_seed(0)
    texts = vocabulary_texts(f"agentgym/{env_id}", env_kwargs, range(8))
    model, tokenizer = load_policy("tiny", device="cpu", dtype="float32", texts=texts, seed=0)
    before = [p.detach().clone() for p in model.parameters()]

    # The README's lines.
    rollout = AgentgymRollout(
        env_id, tokenizer, env_kwargs=env_kwargs, max_new_tokens=max_new_tokens
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=episode_return,
        train_dataset=rollout.dataset(num_prompts=4),
        rollout_func=rollout,
        args=cpu_grpo_config(
            tmp_path / "trl",
            num_generations=8,
            max_steps=2,
            learning_rate=1e-2,
            max_completion_length=64,
        ),
    )
    seen: list[dict] = []
    original = rollout.__call__

    def recording(prompts, trainer_):
        out = original(prompts, trainer_)
        seen.append(out)
        return out

    trainer.rollout_func = recording
    trainer.train()

    assert trainer.state.global_step == 2
    assert len(seen) == 2  # one rollout per step
    out = seen[0]
    for completion, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert len(completion) == len(mask) and 1 <= sum(mask)
    # Multi-turn Sokoban: the environment's tokens (masked out) sit between the policy's turns.
    if env_id == "Sokoban-v0":
        assert any(0 in mask for mask in out["env_mask"])
        assert any(t == 2 for t in out["turns"])
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert logged and all("rewards/episode_return/mean" in h for h in logged)
    # A learning step happened: some group's episodes got different returns (nonzero advantages;
    # TRL logs float noise, ~1e-8, as reward_std for equal rewards, so the returns are compared)
    # and the optimizer moved the weights.
    groups = []  # the returns of each group: the 8 generations of one prompt
    for out in seen:
        assert len(out["episode_return"]) == 16
        for i in range(0, 16, 8):
            prompts = {tuple(ids) for ids in out["prompt_ids"][i : i + 8]}
            assert len(prompts) == 1
            groups.append(out["episode_return"][i : i + 8])
    assert any(len(set(group)) > 1 for group in groups), groups
    assert any(h["reward_std"] > 1e-3 for h in logged)
    changed = any(
        not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True)
    )
    assert changed


def test_episode_return_and_short_ids() -> None:
    assert episode_return([None, None], episode_return=[1, -0.5]) == [1.0, -0.5]
    with pytest.raises(ValueError, match="unknown environment id 'Nope-v0'"):
        AgentgymRollout("Nope-v0", tokenizer=None)
