"""Runs and checkpoints written by earlier versions: a run folder whose config.yaml predates a
config key resumes (the key counts as its default), and a checkpoint that lacks weights of its
architecture is refused rather than completed at random."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from baselines.config import load_config
from baselines.llm.policy import load_policy
from baselines.trainer import Trainer
from tests.test_trainer import BANDIT_RAW, SMALL_STEP


def test_a_run_started_before_algorithm_critic_existed_still_resumes(tmp_path: Path) -> None:
    """A run folder whose config.yaml predates ``algorithm.critic`` lacks the key; its default
    (``head``) is what that run computed, so the run resumes (it was once refused: "was None
    in this run and is 'head' now")."""
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
    """A LoRA checkpoint of an earlier version holds peft's names (``q_proj.base_layer.weight``)
    in model.safetensors; ``load_policy`` (the loader of ``--resume`` and of ``hf:`` eval)
    refuses it instead of initialising the adapted projections anew (transformers only warns)."""
    from peft import LoraConfig, get_peft_model

    model, tokenizer = load_policy("tiny", device="cpu", dtype="float32", texts=["a b c"], seed=0)
    want = {k: v.detach().clone() for k, v in model.state_dict().items()}
    complete = tmp_path / "complete"  # the same weights under their own names
    model.save_pretrained(complete, safe_serialization=True)
    tokenizer.save_pretrained(complete)
    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    folder = tmp_path / "checkpoint"
    peft_model.get_base_model().save_pretrained(folder, safe_serialization=True)  # the old way
    tokenizer.save_pretrained(folder)
    with pytest.raises(ValueError, match="weights of the architecture are not in"):
        load_policy(str(folder), device="cpu", dtype="float32")
    # The same weights saved under their own names load, unchanged.
    loaded, _ = load_policy(str(complete), device="cpu", dtype="float32")
    got = loaded.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)
