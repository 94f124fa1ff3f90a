"""PPO's separate critic model (``algorithm.critic: model``, baselines/llm/critic.py) on the tiny model:
the policy's update is the policy loss's alone, the critic learns, and a resume is exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from baselines.config import load_config
from baselines.trainer import Trainer
from tests.test_trainer import BANDIT_RAW, SMALL_STEP

# PPO on 2 groups x 4 episodes in two mini-batches of 4: two optimizer steps, so the critic's
# body moves too (in the first step its zero-initialised value head passes it no gradient).
# critic_lr 0.1: the head's first step is large enough that the value loss reaches a shared trunk.
PPO_TWO_STEPS = (
    *SMALL_STEP,
    "algorithm.name=ppo",
    "algorithm.ppo_mini_batch_size=4",
    "algorithm.critic_lr=0.1",
)


def _one_update(out: Path, *overrides: str) -> tuple[Trainer, dict, dict[str, torch.Tensor]]:
    """Step 0 of a fresh run; returns the trainer, its metrics and the critic's weights before."""
    config = load_config(None, [*BANDIT_RAW, f"train.out_dir={out}", *PPO_TWO_STEPS, *overrides])
    trainer = Trainer(config, progress=False)
    critic = trainer.critic
    before = (
        {} if critic is None else {k: v.detach().clone() for k, v in critic.state_dict().items()}
    )
    try:
        metrics = trainer.step(0)
    finally:
        trainer.close()
    return trainer, metrics, before


def _policy(trainer: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.model.parameters()]


def test_the_policy_update_is_the_policy_loss_alone_and_the_critic_learns(tmp_path: Path) -> None:
    """With a critic model the policy's two AdamW steps equal those of the head critic with
    value_coef 0 (the policy loss alone: both critics start at values 0, so the advantages
    agree), while the head critic with value_coef 0.5 moves the policy elsewhere (the value loss
    reaches the shared trunk once the head is nonzero, in the second step); the critic model's
    weights, body and head, move and it logs the critic/* figures."""
    model_run, m_model, critic_before = _one_update(tmp_path / "model", "algorithm.critic=model")
    alone, m_alone, _ = _one_update(tmp_path / "alone", "algorithm.value_coef=0")
    shared, _, _ = _one_update(tmp_path / "shared", "algorithm.value_coef=0.5")

    assert model_run.value_head is None and len(model_run.optimizer.param_groups) == 1
    assert m_model["actor/optimizer_steps"] == m_alone["actor/optimizer_steps"] == 2.0
    for key in ("actor/pg_loss", "actor/entropy", "actor/grad_norm", "actor/ratio_mean"):
        assert m_model[key] == pytest.approx(m_alone[key], rel=1e-6, abs=1e-7), key
    for a, b in zip(_policy(model_run), _policy(alone), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert any(
        (a - b).abs().max() > 1e-4 for a, b in zip(_policy(shared), _policy(alone), strict=True)
    )

    after = model_run.critic.state_dict()
    moved = {k for k, v in critic_before.items() if not torch.equal(v, after[k])}
    assert "value_head.linear.weight" in moved
    assert any(k.startswith("model.model.layers.") for k in moved)  # the body, not only the head
    assert m_model["critic/vf_loss"] > 0 and "critic/vpred_mean" in m_model
    # Its own gradient norm: logged with a critic model only (the head's is in actor/grad_norm).
    assert m_model["critic/grad_norm"] > 0 and "critic/grad_norm" not in m_alone
    # Gradients are freed until the next update, the critic's too.
    assert all(p.grad is None for p in model_run.critic.parameters())


@pytest.mark.parametrize("lora", [[], ["model.lora_rank=4"]], ids=["full", "lora"])
def test_a_resumed_run_continues_as_the_uninterrupted_one(tmp_path: Path, lora: list[str]) -> None:
    """3 steps straight vs 2 steps, then ``--resume`` for step 2: the same metrics at every step
    and the same final policy and critic weights (the checkpoint holds the critic's weights and
    its AdamW state, ``critic.safetensors`` and ``critic_optimizer.pt``)."""
    common = [
        *BANDIT_RAW,
        *PPO_TWO_STEPS,
        "algorithm.critic=model",
        "train.save_every=1",
        "train.max_steps_without_signal=0",
        *lora,
    ]
    straight, split = tmp_path / "straight", tmp_path / "split"
    Trainer(
        load_config(None, [*common, f"train.out_dir={straight}", "train.steps=3"]), progress=False
    ).run()
    Trainer(
        load_config(None, [*common, f"train.out_dir={split}", "train.steps=2"]), progress=False
    ).run()
    checkpoint = split / "checkpoint"
    assert (checkpoint / "critic.safetensors").is_file()
    assert (checkpoint / "critic_optimizer.pt").is_file()
    assert not (checkpoint / "value_head.pt").exists()
    resumed = Trainer(
        load_config(None, [*common, f"train.out_dir={split}", "train.steps=3"]),
        resume=True,
        progress=False,
    )
    assert resumed.start_step == 2
    resumed.run()

    def lines(run: Path) -> list[dict]:
        return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]

    want, got = lines(straight), lines(split)
    assert [x["step"] for x in got] == [0, 1, 2]
    assert want[2]["critic/vf_loss"] is not None  # step 2 updated the critic
    for w, g in zip(want, got, strict=True):
        for key, value in w.items():
            if value is None or not key.startswith(("actor/", "critic/", "rollout/")):
                continue
            # Engine vs update log-probs, float rounding (~1e-7; a resumed LoRA policy is a peft
            # model loaded, not made, and rounds otherwise), as in tests/test_distributed.py.
            tolerance = 1e-5 if key.startswith("rollout/logprob_diff") else 1e-9
            assert g[key] == pytest.approx(value, rel=1e-6, abs=tolerance), (w["step"], key)
    for name in (
        "critic.safetensors",
        "adapter/adapter_model.safetensors" if lora else "model.safetensors",
    ):
        a = load_file(straight / "checkpoint" / name)
        b = load_file(checkpoint / name)
        assert a.keys() == b.keys()
        for key in a:
            torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-7, msg=key)


def test_bf16_autocast_keeps_the_critic_float32(tmp_path: Path) -> None:
    """Under bf16 autocast the critic's values come back float32 (they fill float32 tensors) and
    its weights and AdamW state stay float32, as the policy's."""
    trainer, metrics, _ = _one_update(tmp_path, "algorithm.critic=model", "model.dtype=bfloat16")
    assert trainer.autocast_dtype is torch.bfloat16
    assert metrics["critic/vf_loss"] > 0
    assert {p.dtype for p in trainer.critic.parameters()} == {torch.float32}
    state = trainer.critic_optimizer.state_dict()["state"]
    assert state and all(
        v.dtype == torch.float32 for s in state.values() for k, v in s.items() if k != "step"
    )
