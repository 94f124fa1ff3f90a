"""The trainer end to end on a tiny random-init model: learning, outputs, resume, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from baselines.config import load_config
from baselines.rl.batch import build_batch
from baselines.trainer import Trainer
from tests.helpers import FakeEngine, assert_records_this_code

REPO = Path(__file__).resolve().parent.parent

# Bandit with raw one-token answers: a random-init word-level model can say "1", "2" or an arm
# name. The risky arm always pays (high_arm_prob=1.0) so success is a clean learning signal.
BANDIT_RAW = [
    "model.path=tiny",
    "rollout.env_id=agentgym/Bandit-v0",
    "rollout.env_kwargs={action_format: raw, high_arm_prob: 1.0}",
    "rollout.think_prefix=false",
    "rollout.max_new_tokens=1",
    "train.threads=1",
    # Values pinned by these tests are float32's; bf16 autocast has its own tests below.
    "model.dtype=float32",
]


def _config(tmp_path: Path, *overrides: str):
    return load_config(None, [*BANDIT_RAW, f"train.out_dir={tmp_path / 'run'}", *overrides])


# A small update: 2 groups of 4 episodes at lr 1e-2, without validation, diagnostics or filter.
SMALL_STEP = (
    "rollout.num_groups=2",
    "rollout.group_size=4",
    "rollout.val_episodes=0",
    "algorithm.lr=0.01",
    "diagnostics.every=0",
    "filter.strategy=none",
)


def test_grpo_learns_bandit(tmp_path: Path) -> None:
    """Success rises over a fixed-seed run: the policy learns to answer with an arm at all (valid
    actions go from ~0 to ~1) and the risky arm is among them. Observed: success 0.0-0.1 in the
    first steps and 0.4-0.8 from step 10 on (8 groups x 8 episodes, lr 1e-2)."""
    config = _config(
        tmp_path,
        "train.steps=16",
        "train.save_every=100",
        "rollout.num_groups=8",
        "rollout.group_size=8",
        "rollout.val_episodes=0",
        "algorithm.lr=0.01",
        "algorithm.micro_batch_size=64",
        "diagnostics.every=0",
        "filter.strategy=none",
    )
    history = Trainer(config, progress=False).run()
    success = [h["rollout/success_rate"] for h in history]
    valid = [h["rollout/valid_action_rate"] for h in history]
    assert np.mean(success[-5:]) > np.mean(success[:4]) + 0.25
    assert np.mean(valid[-5:]) > 0.9 > 0.3 > np.mean(valid[:4])


def test_two_mini_batches_move_the_ratio_and_clip(tmp_path: Path) -> None:
    """RAGEN's PPO mini-batches (``algorithm.ppo_mini_batch_size``): 64 sequences in mini-batches
    of 32 are two optimizer steps per pass. PPO: the random value head gives every token an
    advantage even though the random policy's rewards are all equal at step 0. The first step's ratio is exactly 1 (its policy is the
    rollout policy); the second step sees the policy the first step moved, so its ratio is off 1
    and, with a large learning rate, the clip acts (clip fraction > 0)."""
    config = _config(
        tmp_path,
        "train.steps=1",
        "rollout.num_groups=8",
        "rollout.group_size=8",
        "rollout.val_episodes=0",
        "algorithm.name=ppo",
        "algorithm.lr=0.5",
        "algorithm.micro_batch_size=64",
        "algorithm.ppo_mini_batch_size=32",
        "diagnostics.every=0",
        "filter.strategy=none",
    )
    trainer = Trainer(config, progress=False)
    try:
        metrics = trainer.step(0)
    finally:
        trainer.close()
    assert metrics["actor/optimizer_steps"] == 2.0
    first, second = trainer.minibatch_stats
    assert first["actor/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert first["actor/pg_clipfrac"] == 0.0
    assert abs(second["actor/ratio_mean"] - 1.0) > 1e-3
    assert second["actor/pg_clipfrac"] > 0.0


@pytest.mark.parametrize(
    "algorithm",
    [
        [
            "algorithm.name=ppo",
            "algorithm.kl_coef=0.05",
            "algorithm.entropy_coef=0.01",
            "algorithm.ppo_epochs=2",
        ],
        ["algorithm.name=drgrpo", "algorithm.kl_coef=0.05", "algorithm.kl_estimator=k1"],
        ["algorithm.name=grpo", "model.lora_rank=4"],
    ],
    ids=["ppo-kl-entropy-2epochs", "drgrpo-kl-k1", "grpo-lora"],
)
def test_each_algorithm_runs_and_writes_its_outputs(tmp_path: Path, algorithm: list[str]) -> None:
    config = _config(
        tmp_path,
        "train.steps=2",
        "rollout.num_groups=4",
        "rollout.group_size=4",
        "rollout.val_episodes=4",
        "rollout.val_every=2",
        "algorithm.lr=0.01",
        "algorithm.micro_batch_size=3",
        "diagnostics.every=1",
        "diagnostics.max_pairs=16",
        "filter.strategy=top_p",
        "filter.p=0.9",
        "filter.include_zero=true",
        *algorithm,
    )
    history = Trainer(config, progress=False).run()
    out = Path(config.train.out_dir)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1]
    last = history[-1]
    for key in (
        "rollout/reward_mean",
        "rollout/success_rate",
        "filter/kept_fraction",
        "collapse/valid_thinking_rate",
        "actor/tokens_trained",
        "actor/entropy",
        "timing/generation_s",
        "val/success_rate",
    ):
        assert key in last, key
    assert all(k == "step" or "/" in k for k in last)  # every metric is namespaced
    if "algorithm.name=ppo" in algorithm:
        assert "critic/vf_loss" in last and "actor/kl_ref" in last
        assert last["actor/pg_clipfrac"] >= 0.0
    # Raw answers have no <think> block, so no reasoning z (RAGEN-2's rule): every turn is
    # counted and none is valid; the MI metrics are undefined (null on the line).
    assert last["collapse/num_pairs_total"] == 16.0 and last["collapse/valid_thinking_rate"] == 0.0
    assert "collapse/mi_estimate" not in last and lines[-1]["collapse/mi_estimate"] is None
    for name in ("success", "reward", "entropy_vs_mi", "retrieval", "kept_fraction"):
        png = out / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "checkpoint" / "state.json").is_file()
    assert json.loads((out / "checkpoint" / "state.json").read_text())["step"] == 1


def test_resume_continues_with_no_lost_or_repeated_step(tmp_path: Path) -> None:
    common = [*SMALL_STEP, "train.save_every=1"]
    straight = load_config(
        None, [*BANDIT_RAW, f"train.out_dir={tmp_path / 'a'}", "train.steps=4", *common]
    )
    expected = Trainer(straight, progress=False).run()

    first = load_config(
        None, [*BANDIT_RAW, f"train.out_dir={tmp_path / 'b'}", "train.steps=2", *common]
    )
    Trainer(first, progress=False).run()
    # A run killed after step 2 was logged but before its checkpoint: that line must go.
    metrics = tmp_path / "b" / "metrics.jsonl"
    with metrics.open("a") as fh:
        fh.write(json.dumps({"step": 2, "rollout/reward_mean": 123.0}) + "\n")
    with pytest.raises(FileExistsError, match="--resume"):
        Trainer(first, progress=False)
    resumed = load_config(
        None, [*BANDIT_RAW, f"train.out_dir={tmp_path / 'b'}", "train.steps=4", *common]
    )
    trainer = Trainer(resumed, resume=True, progress=False)
    assert trainer.start_step == 2
    trainer.run()
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2, 3]
    # Strict JSON: NaN (e.g. the mean spread of an empty set of groups) is written as null.
    assert "NaN" not in metrics.read_text()
    assert any(line["actor/pg_loss"] is not None for line in lines)  # some step updated
    for got, want in zip(lines, expected, strict=True):
        for key in ("rollout/reward_mean", "rollout/success_rate", "actor/pg_loss"):
            if want.get(key) is None:  # no update at this step (equal rewards in every group)
                assert got[key] is None, (got["step"], key)
            else:
                assert got[key] == pytest.approx(want[key], abs=1e-9), (got["step"], key)


def test_resume_with_other_settings_is_refused(tmp_path: Path) -> None:
    first = _config(
        tmp_path,
        "train.steps=1",
        "rollout.num_groups=2",
        "rollout.group_size=2",
        "rollout.val_episodes=0",
        "diagnostics.every=0",
    )
    Trainer(first, progress=False).run()
    changed = _config(
        tmp_path,
        "train.steps=2",
        "rollout.num_groups=2",
        "rollout.group_size=3",
        "rollout.val_episodes=0",
        "diagnostics.every=0",
    )
    with pytest.raises(ValueError, match="rollout.group_size was 2 in this run and is 3 now"):
        Trainer(changed, resume=True, progress=False)


def test_resume_without_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        Trainer(_config(tmp_path), resume=True, progress=False)


def test_train_cli(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "baselines.train",
        "--no-progress",
        *BANDIT_RAW,
        f"train.out_dir={tmp_path / 'cli'}",
        "train.steps=1",
        "rollout.num_groups=2",
        "rollout.group_size=2",
        "rollout.val_episodes=2",
        "diagnostics.max_pairs=4",
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert '"rollout/reward_mean"' in done.stdout and "metrics.jsonl" in done.stdout
    # Resuming a finished run says so, and runs nothing.
    again = subprocess.run(
        [*cmd, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert "already complete: 1 of train.steps=1 steps done" in again.stdout
    assert "train.steps=2" in again.stdout
    assert len((tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()) == 1
    # Without --config, --resume continues with the run's saved settings: naming the folder
    # and the new length is enough (before, every override had to be given again).
    longer = [sys.executable, "-m", "baselines.train", "--no-progress", "--resume"]
    longer += [f"train.out_dir={tmp_path / 'cli'}", "train.steps=2"]
    done = subprocess.run(longer, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [0, 1]
    # A setting that is not resumable is still refused, naming it.
    other = subprocess.run(
        [*longer, "algorithm.lr=0.5"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert other.returncode == 2 and "algorithm.lr was" in other.stderr
    # Every session records the code that ran it: the first, the resume that found nothing left
    # to do and the longer one; the refused one none.
    record = json.loads((tmp_path / "cli" / "provenance.json").read_text())
    assert len(record["resumed"]) == 2
    for session in (record, *record["resumed"]):
        assert_records_this_code(session)
    # The checkpoint scores on held-out seeds with baselines.evaluate (agentgym eval's hf: agent
    # with the run's settings), which writes a result bundle.
    evaluated = subprocess.run(
        [
            sys.executable,
            "-m",
            "baselines.evaluate",
            "--checkpoint",
            str(tmp_path / "cli" / "checkpoint"),
            "--env",
            "agentgym/Bandit-v0",
            "--episodes",
            "3",
            "--max-new-tokens",
            "2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    printed = json.loads(evaluated.stdout)
    assert printed["bundle"] == str(tmp_path / "cli" / "eval.json")
    summary = printed["summary"]["agentgym/Bandit-v0"]
    assert summary["episodes"] == 3
    assert 0.0 <= summary["success_rate"] <= 1.0
    bundle = json.loads((tmp_path / "cli" / "eval.json").read_text())
    assert bundle["agent"]["name"] == "hf:cli/checkpoint"  # the run, not every "checkpoint"
    assert bundle["agent"]["settings"]["max_new_tokens"] == 2
    assert bundle["agent"]["settings"]["think_prefix"] is False  # from the run's config
    bad = subprocess.run(
        [sys.executable, "-m", "baselines.train", "algorithm.clip_low=2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "algorithm.clip_low: must be < 1" in bad.stderr


class _ThinkEngine(FakeEngine):
    """Answers every prompt with the same sampled ids (a fixed policy): a closed think block, so
    the real tiny model scores a real z."""

    name = "script"
    provides_logprobs = False

    def __init__(self, tokenizer, text: str):
        from baselines.llm.engines import Generation

        self.ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        self.generation = Generation(list(self.ids), tokenizer.decode(self.ids), [], False)

    def generate(self, prompt_ids, sampling, generators=None):
        return [self.generation for _ in prompt_ids]


def test_diagnostics_score_the_think_block_and_the_mi_bound_is_the_prompt_entropy(tmp_path):
    config = _config(
        tmp_path,
        "rollout.env_kwargs={action_format: think_answer}",
        "rollout.think_prefix=true",
        "rollout.max_new_tokens=32",
        "rollout.num_groups=4",
        "rollout.group_size=2",
        "rollout.train_seed=4",
        "rollout.val_episodes=0",
        "diagnostics.max_pairs=16",
        "diagnostics.permutations=8",
    )
    from baselines.episodes import vocabulary_texts
    from baselines.llm.policy import load_policy

    texts = vocabulary_texts(config.rollout.env_id, config.rollout.env_kwargs, range(32))
    _, tok = load_policy("tiny", texts=texts, seed=config.train.seed)
    trainer = Trainer(
        config, progress=False, engine=_ThinkEngine(tok, " the arm </think><answer>1</answer>")
    )
    try:
        episodes, _ = trainer._rollout(0)
        diag = trainer._diagnostics(episodes, 0)
    finally:
        trainer.close()
    assert diag["num_pairs_total"] == 8.0 and diag["valid_thinking_rate"] == 1.0
    assert diag["num_reasonings"] == 8.0
    # The MI upper bound is the entropy of the prompt mixture: step 0 resets seeds 4-7, and
    # Bandit seeds can share an arm pair (hence a prompt), so count the distinct first states.
    env = gymnasium.make("agentgym/Bandit-v0")
    _, counts = np.unique([env.reset(seed=s)[0] for s in range(4, 8)], return_counts=True)
    weights = counts / counts.sum()
    assert diag["mi_upper_bound"] == pytest.approx(-(weights * np.log(weights)).sum())


@pytest.mark.parametrize("metric", ["length", "entropy"])
def test_filter_metrics_read_per_episode_lengths_and_entropies(tmp_path, metric) -> None:
    """``filter.metric`` length / entropy get ``[G, N]`` per-episode values from the trainer: the
    kept group (top_k_abs 1, largest) is the one with the largest group mean."""
    config = _config(
        tmp_path,
        "rollout.env_kwargs={action_format: raw, high_arm_prob: 1.0}",
        "rollout.max_new_tokens=3",
        "rollout.num_groups=3",
        "rollout.group_size=2",
        "rollout.val_episodes=0",
        "diagnostics.every=0",
        "filter.strategy=top_k_abs",
        "filter.k=1",
        f"filter.metric={metric}",
    )
    trainer = Trainer(config, progress=False)
    seen: dict[str, np.ndarray] = {}

    def before_update(step, episodes):  # the trainer's hook, called before the update
        if metric == "length":
            lengths = [sum(len(t.sample.sampled_ids) for t in e.turns) for e in episodes]
            seen["values"] = np.array(lengths, dtype=float)
        else:
            full = build_batch(episodes, trainer.tokenizer.pad_token_id or 0)
            seen["values"] = trainer.actor.episode_entropies(full, (3, 2)).numpy().ravel()

    trainer._on_rollout = before_update
    try:
        metrics = trainer.step(0)
    finally:
        trainer.close()
    values = seen["values"]
    if metric == "entropy":
        assert ((values > 0) & (values <= np.log(len(trainer.tokenizer)) + 1e-6)).all()
    group_means = values.reshape(3, 2).mean(1)
    assert metrics["filter/num_kept"] == 1.0
    assert metrics["filter/score_mean_kept"] == pytest.approx(group_means.max())


@pytest.mark.parametrize(
    ("algorithm", "entropy_coef", "updates"),
    [("grpo", 0.0, False), ("grpo", 0.1, True), ("drgrpo", 0.1, True)],
)
def test_equal_rewards_everywhere_step_only_on_a_regulariser(
    tmp_path: Path, algorithm: str, entropy_coef: float, updates: bool
) -> None:
    """Every reward 0 (both arms pay 0, no format penalty), so every GRPO advantage is exactly 0.
    With no entropy/KL term the gradient is exactly 0 and no step is taken; with an entropy bonus
    the step is taken on it alone, as RAGEN takes it (agent_trainer.py: no equal-reward skip)."""
    config = load_config(
        None,
        [
            *BANDIT_RAW,
            "rollout.env_kwargs={action_format: raw, high_arm_prob: 1.0, high_arm_reward: 0.0, "
            "low_arm_reward: 0.0, format_penalty: 0.0}",
            f"train.out_dir={tmp_path / 'run'}",
            f"algorithm.name={algorithm}",
            f"algorithm.entropy_coef={entropy_coef}",
            "filter.strategy=none",
            "train.steps=1",
            "rollout.val_episodes=0",
            "diagnostics.every=0",
        ],
    )
    trainer = Trainer(config, progress=False)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    (line,) = trainer.run()
    assert line["rollout/reward_mean"] == 0.0
    moved = any(
        not torch.equal(a, b) for a, b in zip(before, trainer.model.parameters(), strict=True)
    )
    assert moved is updates
    assert bool(line.get("actor/skipped")) is not updates
    if updates:
        assert line["actor/pg_loss"] == 0.0  # the step is the entropy bonus's alone


@pytest.mark.parametrize(
    "mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
)
def test_token_budget_micro_batches_give_the_gradient_of_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Rows one at a time (a 16-token budget) or all in one micro-batch: the same update, since
    each micro-batch's loss is weighted by its share of the mini-batch's sampled tokens (or, in
    the seq-mean modes, of its sequences). Every row is longer than 16 tokens, so each runs alone
    under gradient checkpointing."""
    import baselines.update as update_module

    checkpointed = []
    real = update_module.checkpointed_if

    def counting(model, oversized):
        checkpointed.append(oversized)
        return real(model, oversized)

    monkeypatch.setattr(update_module, "checkpointed_if", counting)
    runs = {}
    for name, budget in (("one_row_each", 16), ("all_at_once", 100_000)):
        config = _config(
            tmp_path / name,
            "train.steps=1",
            *SMALL_STEP,
            "algorithm.entropy_coef=0.01",
            f"algorithm.micro_batch_tokens={budget}",
            f"algorithm.loss_agg_mode={mode}",
            "rollout.max_new_tokens=12",  # replies of several lengths: tokens and rows differ
        )
        trainer = Trainer(config, progress=False)
        metrics = trainer.step(0)
        runs[name] = (metrics, [p.detach().clone() for p in trainer.model.parameters()])
        trainer.close()
    (m1, w1), (m2, w2) = runs["one_row_each"], runs["all_at_once"]
    assert checkpointed == [True] * 8 + [False]  # 8 rows alone, checkpointed; then one batch
    assert m1["actor/tokens_trained"] == m2["actor/tokens_trained"] > 0
    for key in ("actor/pg_loss", "actor/entropy", "actor/grad_norm"):
        assert m1[key] == pytest.approx(m2[key], rel=1e-5, abs=1e-7), key
    # AdamW's first step is about lr * sign(grad): entries whose gradient is ~0 amplify float
    # rounding (seen: 2e-6 on 4 of 6,144 entries with the global-generator rollouts; 1.2e-5 on 1
    # of 8,192 with the per-episode generators' batch; 8.9e-5 on 1 of 2,048 with the sampler by
    # inversion, issue 41); 3e-5 is 0.3 % of the step size lr = 0.01, while a mis-weighted
    # micro-batch moves entries by a sizeable part of lr. So: every entry within 2e-4 (2 % of
    # a step) and at most 1 in 1,000 past 3e-5. The gradient's scale is checked above
    # (grad_norm), which AdamW's update hides.
    outliers = total = 0
    for a, b in zip(w1, w2, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=2e-4)
        outliers += int(((a - b).abs() > 3e-5).sum())
        total += a.numel()
    assert outliers <= total // 1000


def test_bf16_autocast_keeps_float32_master_weights_and_optimizer_state(tmp_path: Path) -> None:
    config = _config(tmp_path, "model.dtype=bfloat16", "train.steps=1", *SMALL_STEP)
    trainer = Trainer(config, progress=False)
    assert trainer.autocast_dtype is torch.bfloat16
    metrics = trainer.step(0)
    trainer.close()
    assert metrics["actor/optimizer_steps"] == 1.0
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    state = trainer.optimizer.state_dict()["state"]
    assert state and all(
        v.dtype == torch.float32 for s in state.values() for k, v in s.items() if k != "step"
    )


def test_save_every_zero_saves_the_final_step_only(tmp_path: Path, monkeypatch) -> None:
    saved = []
    original = Trainer.save

    def spy(self, step, *, final=False):
        saved.append((step, final))
        return original(self, step, final=final)

    monkeypatch.setattr(Trainer, "save", spy)
    config = _config(
        tmp_path,
        "train.steps=3",
        "train.save_every=0",
        "train.max_steps_without_update=0",
        "train.max_steps_without_signal=0",
        "rollout.num_groups=2",
        "rollout.group_size=2",
        "rollout.val_episodes=0",
        "diagnostics.every=0",
    )
    Trainer(config, progress=False).run()
    assert saved == [(2, True)]
    assert json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())["step"] == 2


def test_a_think_block_later_in_the_reply_is_no_z(tmp_path: Path) -> None:
    """A reply that opens <think> after other sampled text has no z under either rule (the id
    rule keeps only spans that open the reply); before, the text rule kept it, the id rule did
    not, and the trainer stopped with 'the two rules for z disagree'."""
    from agentgym.lockstep import Step
    from baselines.episodes import EpisodeRecord, Sample

    config = _config(tmp_path, "rollout.val_episodes=0", "diagnostics.max_pairs=8")
    trainer = Trainer(config, progress=False)
    tok = trainer.tokenizer

    def turn(prompt: str, reply: str) -> Step[Sample]:
        ids = tok(reply, add_special_tokens=False)["input_ids"]
        sample = Sample(tok(prompt)["input_ids"], ids, [0.0] * len(ids), False)
        return Step(reply, 0.0, False, False, {}, sample)

    episodes = [
        EpisodeRecord(0, 0, None, turns=[turn("Arm 1", "<think> Teacher </think> 1")]),
        EpisodeRecord(1, 1, None, turns=[turn("Arm 2", "<think> Nurse </think> 2")]),
        EpisodeRecord(2, 2, None, turns=[turn("Arm 1", "pull <think> Nurse </think> 1")]),
    ]
    stats = trainer._diagnostics(episodes, 0)
    assert stats["num_pairs_total"] == 3.0 and stats["num_pairs_valid"] == 2.0
    assert stats["valid_thinking_rate"] == pytest.approx(2 / 3)
    assert (stats["num_reasonings"], stats["num_prompts"], stats["z_special_rate"]) == (2, 2, 0)
    # Pairs are drawn among the valid z: with max_pairs 2 and 6 turns of which 2 have a z,
    # both valid ones are scored (before, 2 turns were drawn first, often invalid ones).
    trainer.config.diagnostics.max_pairs = 2
    invalid = [
        EpisodeRecord(3 + i, 3 + i, None, turns=[turn("Arm 1", "no think")]) for i in range(4)
    ]
    stats = trainer._diagnostics(invalid + episodes[:2], 0)
    trainer.close()
    assert (stats["num_pairs_total"], stats["num_pairs_valid"]) == (6, 2)
    assert (stats["num_reasonings"], stats["num_prompts"]) == (2, 2)
    assert "mi_estimate" in stats


def test_gradients_are_freed_before_the_next_rollout(tmp_path: Path) -> None:
    # They are as large as the weights and unused until the next update.
    config = _config(tmp_path, "train.steps=1", *SMALL_STEP)
    trainer = Trainer(config, progress=False)
    metrics = trainer.step(0)
    trainer.close()
    assert metrics["actor/optimizer_steps"] == 1.0
    assert all(p.grad is None for p in trainer.model.parameters())


def test_a_lora_checkpoint_holds_the_plain_base_weights(tmp_path: Path) -> None:
    """The base model beside ``adapter/`` loads as a plain model with the trained run's base
    weights (a LoRA resume reads it). Before, it held peft's injected names
    (``q_proj.base_layer.weight``, ``q_proj.lora_A.default.weight``), so a resume initialised
    every adapted base weight anew and continued from another model."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    config = _config(tmp_path, "train.steps=1", *SMALL_STEP, "model.lora_rank=4")
    trainer = Trainer(config, progress=False)
    trainer.run()
    checkpoint = tmp_path / "run" / "checkpoint"
    saved = load_file(checkpoint / "model.safetensors")
    assert not [k for k in saved if "lora_" in k or "base_layer" in k]
    with trainer.model.disable_adapter():
        want = {
            k: v.detach().clone() for k, v in trainer.model.get_base_model().state_dict().items()
        }
    loaded = AutoModelForCausalLM.from_pretrained(checkpoint).state_dict()
    want = {k.replace(".base_layer.", "."): v for k, v in want.items() if ".lora_" not in k}
    assert loaded.keys() == want.keys()
    for key, value in want.items():
        torch.testing.assert_close(loaded[key], value, rtol=0, atol=0, msg=key)


def test_signal_removed_groups_by_hand() -> None:
    """Kept count rounded half up: 0.5 of 8 keeps 4, 0.3 of 8 keeps round(2.4) = 2, 0.3 of 5
    keeps round(1.5) = 2, 0.0 keeps none, 1.0 all. Seeded by (seed, step): the same call gives
    the same groups, other steps other ones."""
    from baselines.trainer import signal_removed_groups

    for fraction, groups, removed in ((0.5, 8, 4), (0.3, 8, 6), (0.3, 5, 3), (0.0, 4, 4)):
        got = signal_removed_groups(fraction, groups, seed=3, step=7)
        assert len(got) == removed and got == sorted(set(got)) and set(got) <= set(range(groups))
    assert signal_removed_groups(1.0, 8, seed=3, step=7) == []
    assert signal_removed_groups(0.5, 8, 3, 7) == signal_removed_groups(0.5, 8, 3, 7)
    draws = {tuple(signal_removed_groups(0.5, 8, 3, step)) for step in range(10)}
    assert len(draws) > 5  # C(8, 4) = 70 possible sets


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_signal_fraction_removes_the_reward_of_the_drawn_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, algorithm: str
) -> None:
    """algorithm.signal_fraction 0.5 on 4 groups: the update sees every reward of the 2 drawn
    groups as 0 (the group rewards GRPO reads and the token rewards PPO's GAE reads), the
    others as the env gave them; the rollout metrics keep the env's rewards."""
    from baselines.trainer import signal_removed_groups

    config = _config(
        tmp_path,
        *SMALL_STEP,
        "rollout.num_groups=4",
        f"algorithm.name={algorithm}",
        "algorithm.signal_fraction=0.5",
        "train.steps=1",
    )
    trainer = Trainer(config, progress=False)
    seen: dict[str, torch.Tensor] = {}
    update = trainer._update

    def spy(batch, group_rewards, metrics, timings, gathered=None):
        seen["group"] = group_rewards.clone()
        seen["tokens"] = batch.token_rewards.sum(dim=1).clone()
        seen["rows"] = batch.row_episode.clone()
        return update(batch, group_rewards, metrics, timings, gathered)

    monkeypatch.setattr(trainer, "_update", spy)
    episodes_seen: list = []
    rollout = trainer._rollout

    def keep(step):
        episodes, timings = rollout(step)
        episodes_seen.extend(episodes)
        return episodes, timings

    monkeypatch.setattr(trainer, "_rollout", keep)
    (line,) = trainer.run()
    removed = signal_removed_groups(0.5, 4, config.train.seed, 0)
    assert len(removed) == 2 and line["rollout/signal_groups"] == 2.0
    env = torch.tensor([e.total_reward for e in episodes_seen], dtype=torch.float64).view(4, 4)
    assert line["rollout/reward_mean"] == pytest.approx(float(env.mean()))
    assert env[removed].abs().sum() > 0  # the env did pay in the groups the knob silenced
    expected = env.clone()
    expected[removed] = 0.0
    assert torch.equal(seen["group"], expected)  # no filter: every group kept, in order
    per_row = torch.tensor([float(expected.view(-1)[e]) for e in seen["rows"].tolist()])
    assert torch.allclose(seen["tokens"].double(), per_row.double(), atol=1e-6)


def test_a_run_that_stops_early_validates_the_policy_it_ends_with(tmp_path: Path) -> None:
    """Every reward 0 and no regulariser: GRPO skips every step, and RAGEN's stop after 2 steps
    without an update ends the run at step 1 of 10. Validation is due only every 100 steps, yet
    the last line holds a validation of the policy the run ends with (before, the last figure
    was whichever validation came before the stop: none here)."""
    config = load_config(
        None,
        [
            *BANDIT_RAW,
            "rollout.env_kwargs={action_format: raw, high_arm_prob: 1.0, high_arm_reward: 0.0, "
            "low_arm_reward: 0.0, format_penalty: 0.0}",
            f"train.out_dir={tmp_path / 'run'}",
            "algorithm.entropy_coef=0.0",
            "filter.strategy=none",
            "train.steps=10",
            "train.max_steps_without_update=2",
            "train.max_steps_without_signal=0",
            "rollout.num_groups=2",
            "rollout.group_size=2",
            "rollout.val_episodes=4",
            "rollout.val_every=100",
            "diagnostics.every=0",
        ],
    )
    trainer = Trainer(config, progress=False)
    history = trainer.run()
    assert trainer.stopped_early and [int(m["step"]) for m in history] == [0, 1]
    assert "val/success_rate" not in history[0]
    assert history[1]["val/success_rate"] == 0.0  # both arms pay 0
    assert 0.0 <= history[1]["val/valid_action_rate"] <= 1.0


def test_a_non_finite_gradient_skips_the_step_and_is_counted(tmp_path: Path) -> None:
    """verl's safety net (``dp_actor.py``, ``_optimizer_step``): an inf planted in one gradient
    (a hook on the first parameter) makes the norm non-finite; the step is skipped, the weights
    stay exactly as they were, the skip is counted and warned about once."""
    config = _config(tmp_path, "train.steps=1", *SMALL_STEP, "algorithm.entropy_coef=0.01")
    trainer = Trainer(config, progress=False)
    params = [p for p in trainer.model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    params[0].register_hook(lambda grad: torch.full_like(grad, float("inf")))
    with pytest.warns(RuntimeWarning, match="lower algorithm.lr"):
        metrics = trainer.step(0)
    trainer.close()
    assert metrics["actor/nonfinite_grad_steps"] == 1.0
    assert metrics["actor/optimizer_steps"] == 0.0
    for p, b in zip(params, before, strict=True):
        assert torch.isfinite(p).all()
        assert torch.equal(p.detach(), b)
