"""Review of 0f8c851 (algorithm.critic) and 9422fd5 (LoRA checkpoints): resuming runs and loading
checkpoints written before those commits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from baselines.config import load_config
from baselines.policy import load_policy
from baselines.trainer import Trainer
from tests.test_trainer import BANDIT_RAW, SMALL_STEP


def test_a_run_started_before_algorithm_critic_existed_still_resumes(tmp_path: Path) -> None:
    """A run folder whose config.yaml predates 0f8c851 has no ``algorithm.critic``; its
    defaults are exactly what that run computed (``head``). ``--resume`` now refuses every such
    run: "algorithm.critic was None in this run and is 'head' now" (check_same_run reads a
    missing key as None). Expected: a key the saved config lacks compares as its default."""
    out = tmp_path / "run"
    common = [*BANDIT_RAW, *SMALL_STEP, f"train.out_dir={out}", "train.save_every=1"]
    Trainer(load_config(None, [*common, "train.steps=1"]), progress=False).run()
    saved = out / "config.yaml"
    data = yaml.safe_load(saved.read_text())
    del data["algorithm"]["critic"]  # as written by the code before 0f8c851
    saved.write_text(yaml.safe_dump(data))
    trainer = Trainer(load_config(None, [*common, "train.steps=2"]), resume=True, progress=False)
    assert trainer.start_step == 1
    trainer.close()


def test_a_checkpoint_missing_base_weights_is_refused_not_reinitialised(tmp_path: Path) -> None:
    """A LoRA checkpoint written before 9422fd5 holds peft's names (``q_proj.base_layer.weight``)
    in model.safetensors. 9422fd5 fixes new checkpoints, but ``load_policy`` (the loader of
    ``--resume`` and of ``hf:`` eval) still loads such a folder silently, initialising every
    adapted projection anew (transformers only logs it), so a resume continues from another
    model. Expected: a folder that lacks weights of its architecture is an error."""
    from peft import LoraConfig, get_peft_model

    model, tokenizer = load_policy("tiny", device="cpu", dtype="float32", texts=["a b c"], seed=0)
    want = {k: v.detach().clone() for k, v in model.state_dict().items()}
    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    folder = tmp_path / "checkpoint"
    peft_model.get_base_model().save_pretrained(folder, safe_serialization=True)  # the old way
    tokenizer.save_pretrained(folder)
    try:
        loaded, _ = load_policy(str(folder), device="cpu", dtype="float32")
    except (ValueError, RuntimeError, OSError):
        return  # refused: what should happen
    got = loaded.state_dict()
    moved = [k for k in want if k in got and not torch.equal(got[k], want[k])]
    pytest.fail(f"loaded without error but with {len(moved)} weights re-initialised: {moved[:2]}")
