"""agentgym environments under Hugging Face TRL's GRPOTrainer (two real steps, tiny model, CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agentgym.integrations.trl import AgentgymRollout, episode_return
from baselines.policy import load_policy
from baselines.trainer import vocabulary_texts


@pytest.mark.parametrize(
    ("env_id", "env_kwargs"),
    [
        ("Bandit-v0", {"action_format": "raw"}),
        ("Sokoban-v0", {"action_format": "raw", "max_turns": 2}),
    ],
)
def test_two_grpo_trainer_steps(tmp_path: Path, env_id: str, env_kwargs: dict) -> None:
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(0)
    texts = vocabulary_texts(f"agentgym/{env_id}", env_kwargs, range(8))
    model, tokenizer = load_policy("tiny", device="cpu", dtype="float32", texts=texts, seed=0)
    before = [p.detach().clone() for p in model.parameters()]

    # The README's lines.
    rollout = AgentgymRollout(env_id, tokenizer, env_kwargs=env_kwargs, max_new_tokens=4)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=episode_return,
        train_dataset=rollout.dataset(num_prompts=4),
        rollout_func=rollout,
        args=GRPOConfig(
            output_dir=str(tmp_path / "trl"),
            num_generations=2,
            per_device_train_batch_size=4,
            max_steps=2,
            learning_rate=1e-2,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_steps=1,
            seed=0,
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
    assert len(seen) >= 1
    out = seen[0]
    for completion, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert len(completion) == len(mask) and 1 <= sum(mask)
    # Multi-turn Sokoban: the environment's tokens (masked out) sit between the policy's turns.
    if env_id == "Sokoban-v0":
        assert any(0 in mask for mask in out["env_mask"])
        assert any(t == 2 for t in out["turns"])
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert logged and all("rewards/episode_return/mean" in h for h in logged)
    changed = any(
        not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True)
    )
    assert changed or all(h.get("reward_std", 0.0) == 0.0 for h in logged)


def test_episode_return_and_short_ids() -> None:
    assert episode_return([None, None], episode_return=[1, -0.5]) == [1.0, -0.5]
    with pytest.raises(ValueError, match="unknown environment id 'Nope-v0'"):
        AgentgymRollout("Nope-v0", tokenizer=None)
