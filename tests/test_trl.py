"""agentgym environments under Hugging Face TRL's GRPOTrainer (tiny model, CPU, real steps).

What is pinned: TRL gets exactly the agentgym trainer's episode rows (same seeds, same sampled
ids and environment ids); a template that rewrites history is scored row by row, each sampled id
in the context it was sampled in; the SNR-Aware Filter inside TRL drops the groups
``snr_filter`` drops and the loss is then the loss over the kept groups alone; the MI and collapse
metrics reach TRL's logs under the trainer's names; the README's snippet runs a step.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import torch

from baselines.config import DiagnosticsConfig, load_config
from baselines.episodes import vocabulary_texts
from baselines.integrations.trl import (
    AgentgymGRPOTrainer,
    AgentgymRollout,
    episode_return,
    episode_sequence,
)
from baselines.llm.policy import load_policy
from baselines.rl.filtering import FilterConfig, snr_filter
from baselines.tracking import METRIC_NAMES
from baselines.trainer import Trainer
from tests.helpers import ROOT, FakeEngine, cpu_grpo_config
from tests.test_episodes import DROP_REASONING, ScriptedEngine


def _args(tmp_path: Path, **overrides):
    """:func:`tests.helpers.cpu_grpo_config` with these tests' settings: 2 groups of 4 episodes,
    one step, float32, ``overrides`` on top."""
    settings = dict(
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=1,
        learning_rate=1e-2,
        bf16=False,
        max_completion_length=64,
    )
    return cpu_grpo_config(tmp_path / "trl", **{**settings, **overrides})


def _kwargs(model, tokenizer, rollout: AgentgymRollout, num_prompts: int, reward=episode_return):
    """The trainer arguments every test gives (the README's), ``args`` apart."""
    return dict(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward,
        train_dataset=rollout.dataset(num_prompts=num_prompts),
        rollout_func=rollout,
    )


def _tiny(env_id: str, env_kwargs: dict):
    texts = vocabulary_texts(f"agentgym/{env_id}", env_kwargs, range(8))
    return load_policy("tiny", device="cpu", dtype="float32", texts=texts, seed=0)


def _prompts(rollout: AgentgymRollout, groups: int, size: int) -> list:
    """TRL's order: each of ``groups`` dataset prompts ``size`` times in a row."""
    dataset = rollout.dataset(num_prompts=groups)
    return [dataset[g]["prompt"] for g in range(groups) for _ in range(size)]


# ---------------------------------------------------------------------- the trainer's own rows


def test_completion_ids_and_env_mask_are_the_trainers_own_episode_rows(tmp_path: Path) -> None:
    """Same model, seeds and torch seed: the agentgym trainer's step-0 rollout and the TRL
    rollout give the same episodes, and TRL's sequences are exactly their training rows."""
    from trl import GRPOTrainer

    env_kwargs = {"action_format": "raw", "max_turns": 2, "format_penalty": -1.0}
    config = load_config(
        None,
        [
            "model.path=tiny",
            "rollout.env_id=agentgym/Sokoban-v0",
            "rollout.env_kwargs={action_format: raw, max_turns: 2, format_penalty: -1.0}",
            "rollout.think_prefix=false",
            "rollout.max_new_tokens=3",
            "rollout.num_groups=2",
            "rollout.group_size=4",
            "rollout.val_episodes=0",
            "rollout.engine=hf",
            "diagnostics.every=0",
            "train.threads=1",
            "model.dtype=float32",
            f"train.out_dir={tmp_path / 'run'}",
        ],
    )
    agentgym = Trainer(config, progress=False)
    episodes, _ = agentgym._rollout(0)
    agentgym.close()

    rollout = AgentgymRollout(
        "Sokoban-v0", agentgym.tokenizer, env_kwargs=env_kwargs, max_new_tokens=3,
        think_prefix=False, seed=config.rollout.train_seed, sampling_seed=config.train.seed,
    )  # fmt: skip
    trl = GRPOTrainer(
        **_kwargs(agentgym.model, agentgym.tokenizer, rollout, 2),
        args=_args(tmp_path, temperature=config.rollout.temperature),
    )
    torch.manual_seed(config.train.seed * 1_000_003 + 0)  # the trainer's step-0 seed
    out = rollout(_prompts(rollout, 2, 4), trl)

    assert len(out["completion_ids"]) == len(episodes) == 8
    multi_turn = 0
    for i, episode in enumerate(episodes):
        (row,) = episode.rows  # ChatML keeps the prefix: one row per episode
        prompt, completion = out["prompt_ids"][i], out["completion_ids"][i]
        assert prompt + completion == row.input_ids
        assert [0] * len(prompt) + out["env_mask"][i] == row.loss_mask
        assert [0.0] * len(prompt) + out["logprobs"][i] == row.logprobs
        # Mask 1 is exactly the sampled ids of every turn, in order.
        sampled = [t for t, m in zip(completion, out["env_mask"][i], strict=True) if m]
        assert sampled == [t for turn in episode.turns for t in turn.sample.sampled_ids]
        assert out["episode_return"][i] == episode.total_reward
        assert out["turns"][i] == len(episode.turns)
        multi_turn += len(episode.turns) == 2 and 0 in out["env_mask"][i]
    assert multi_turn > 0  # the environment's ids (mask 0) sit between two sampled turns


def test_two_grpo_trainer_steps_move_the_weights(tmp_path: Path) -> None:
    """A plain GRPOTrainer with the rollout: two steps, multi-turn Sokoban (a 1-token raw reply
    is sometimes a move word: valid -0.1 vs the -1.0 format penalty set here), weights change.
    Measured (seed 0): returns differ within some group in both steps."""
    from trl import GRPOTrainer

    env_kwargs = {"action_format": "raw", "max_turns": 2, "format_penalty": -1.0}
    torch.manual_seed(0)
    model, tokenizer = _tiny("Sokoban-v0", env_kwargs)
    before = [p.detach().clone() for p in model.parameters()]
    rollout = AgentgymRollout("Sokoban-v0", tokenizer, env_kwargs=env_kwargs, max_new_tokens=1)
    trainer = GRPOTrainer(
        **_kwargs(model, tokenizer, rollout, 4),
        args=_args(tmp_path, num_generations=8, per_device_train_batch_size=16, max_steps=2),
    )
    seen: list[dict] = []
    original = trainer.rollout_func

    def recording(prompts, trainer_):
        out = original(prompts, trainer_)
        seen.append(out)
        return out

    trainer.rollout_func = recording
    trainer.train()
    assert trainer.state.global_step == 2 and len(seen) == 2
    groups = [out["episode_return"][i : i + 8] for out in seen for i in (0, 8)]
    assert any(len(set(group)) > 1 for group in groups), groups
    assert any(t == 2 for out in seen for t in out["turns"])
    changed = any(
        not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters(), strict=True)
    )
    assert changed


@pytest.mark.parametrize("ending", ["stop", "end", "length"])
def test_a_reply_ended_by_the_stop_string_is_a_finished_completion_for_trl(
    tmp_path: Path, ending: str
) -> None:
    """TRL calls a completion truncated when its last id is not an EOS (or pad), and with
    ``mask_truncated_completions`` drops its loss (``GRPOTrainer._generate_and_score_completions``,
    TRL 1.16). A reply the episode loop ended at ``</answer>`` is finished: the rollout closes it
    with the EOS as a template id (mask 0, log-prob 0.0). One ended by a sampled ``<|im_end|>``
    is left as sampled; one that reached neither (cut by length) stays truncated."""
    from trl import GRPOTrainer

    env_kwargs = {"max_turns": 1}
    model, tokenizer = _tiny("Sokoban-v0", env_kwargs)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    body = _think_reply(tokenizer, "push the box", "Up")[:-1]  # ends "... </answer>"
    reply = {"stop": body, "end": [*body, im_end], "length": body[:-1]}[ending]
    engine = ScriptedEngine(tokenizer, [reply], {im_end})
    rollout = AgentgymRollout("Sokoban-v0", tokenizer, env_kwargs=env_kwargs, engine=engine)
    trainer = GRPOTrainer(
        **_kwargs(model, tokenizer, rollout, 2),
        args=_args(tmp_path, mask_truncated_completions=True),
    )
    out = rollout(_prompts(rollout, 2, 4), trainer)
    eos_and_pad = [*trainer.eos_token_ids, tokenizer.pad_token_id]  # TRL's own test
    for ids, mask, logprobs in zip(
        out["completion_ids"], out["env_mask"], out["logprobs"], strict=True
    ):
        assert [t for t, m in zip(ids, mask, strict=True) if m] == reply  # sampled ids untouched
        assert (ids[-1] not in eos_and_pad) == (ending == "length")
        if ending == "stop":
            assert ids[-len(reply) - 1 :] == [*reply, tokenizer.eos_token_id]
            assert mask[-1] == 0 and logprobs[-1] == 0.0
        else:
            assert ids[-len(reply) :] == reply and mask[-1] == 1


def test_trls_private_api_is_the_one_the_adapter_was_checked_against(tmp_path: Path) -> None:
    """Fails, naming what moved, when the installed TRL is not the release the adapter was
    checked against or its private methods and attributes differ from those listed."""
    import inspect

    import trl
    from packaging.requirements import Requirement
    from trl import GRPOTrainer

    from baselines.integrations.trl import (
        TRL_PRIVATE_ATTRIBUTES,
        TRL_PRIVATE_METHODS,
        TRL_TESTED_VERSION,
    )

    # the trl extra's requirement ("trl>=...") in pyproject.toml
    spec = Requirement(re.search(r'"(trl[<>=!~][^"]*)"', (ROOT / "pyproject.toml").read_text())[1])
    assert TRL_TESTED_VERSION in spec.specifier, (spec, TRL_TESTED_VERSION)
    assert trl.__version__ in spec.specifier, (
        f"TRL {trl.__version__} is installed; the adapter was checked against "
        f"{TRL_TESTED_VERSION} (pyproject.toml: {spec})"
    )

    def moved_methods(methods: dict[str, tuple[str, ...]]) -> list[str]:
        moved = []
        for name, leading in methods.items():
            method = getattr(GRPOTrainer, name, None)
            if method is None:
                moved.append(f"GRPOTrainer.{name} is gone")
                continue
            params = tuple(inspect.signature(method).parameters)[: len(leading)]
            if params != leading:
                moved.append(f"GRPOTrainer.{name}{params} (checked: {leading})")
        return moved

    # the check catches a renamed parameter and a missing method
    assert len(moved_methods({"_compute_loss": ("self", "model", "batch"), "_gone": ()})) == 2
    moved = moved_methods(TRL_PRIVATE_METHODS)
    model, tokenizer = _tiny("Sokoban-v0", {"max_turns": 1})
    rollout = AgentgymRollout("Sokoban-v0", tokenizer, env_kwargs={"max_turns": 1})
    trainer = GRPOTrainer(**_kwargs(model, tokenizer, rollout, 2), args=_args(tmp_path))
    moved += [
        f"GRPOTrainer().{a} is gone" for a in TRL_PRIVATE_ATTRIBUTES if not hasattr(trainer, a)
    ]
    assert not moved, f"TRL {trl.__version__} moved what the adapter relies on: {moved}"


# ---------------------------------------------------------------------- history rewritten


def _think_reply(tokenizer, words: str, action: str) -> list[int]:
    ids = tokenizer(f"{words} </think> <answer> {action} </answer>", add_special_tokens=False)[
        "input_ids"
    ]
    assert tokenizer.unk_token_id not in ids, words
    return ids + [tokenizer.convert_tokens_to_ids("<|im_end|>")]


def _scripted(tmp_path: Path, model, tokenizer, replies: list[tuple[str, str]], env_kwargs):
    """GRPOTrainer arguments whose rollout replays think-answer ``replies`` (reasoning words,
    action), one per turn, ending with ``<|im_end|>``, on 2 Sokoban prompts."""
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ids = [_think_reply(tokenizer, words, action) for words, action in replies]
    engine = ScriptedEngine(tokenizer, ids, {im_end})
    rollout = AgentgymRollout("Sokoban-v0", tokenizer, env_kwargs=env_kwargs, engine=engine)
    return dict(**_kwargs(model, tokenizer, rollout, 2), args=_args(tmp_path))


def test_a_template_that_rewrites_history_is_scored_row_by_row(tmp_path: Path) -> None:
    """DROP_REASONING (tests/test_episodes.py) drops earlier reasoning, so each turn starts a new
    row. TRL's sequence holds the rows end to end; AgentgymGRPOTrainer's log-probs of every
    sampled id equal those of a forward pass over that id's own row alone (computed here
    independently: log_softmax of the model's logits), while scoring the joined sequence would
    not; a plain GRPOTrainer refuses the episode."""
    from trl import GRPOTrainer

    env_kwargs = {"max_turns": 2}
    model, tokenizer = _tiny("Sokoban-v0", env_kwargs)
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = DROP_REASONING
    replies = [("push the box", "Up"), ("the box", "Left")]
    kwargs = _scripted(tmp_path, model, tokenizer, replies, env_kwargs)
    rollout, engine = kwargs["rollout_func"], kwargs["rollout_func"].engine
    prompts = _prompts(rollout, 2, 4)
    with pytest.raises(ValueError, match="AgentgymGRPOTrainer"):
        rollout(prompts, GRPOTrainer(**kwargs))

    engine.calls.clear()
    trainer = AgentgymGRPOTrainer(
        **kwargs, snr_filter=FilterConfig(strategy="none"), diagnostics=DiagnosticsConfig(every=0)
    )
    trainer.model.train()
    output = trainer._generate_and_score_completions([{"prompt": p} for p in prompts])
    batch = rollout.last
    assert all(len(e.rows) == 2 for e in batch.episodes)
    episode = batch.episodes[0]
    seq = episode_sequence(episode)
    assert seq.prompt_ids + seq.completion_ids == episode.rows[0].input_ids + (
        episode.rows[1].input_ids
    )
    # The rewrite: the first reply's reasoning is gone from the second row's prompt.
    first, second = (tokenizer.decode(row.input_ids) for row in episode.rows)
    assert "push the box" in first and "push the box" not in second
    assert output["agentgym_row"][0, : len(seq.row_index)].tolist() == seq.row_index

    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    width = output["completion_ids"].size(1)
    trainer._agentgym_rows = output["agentgym_row"]
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width)
    trainer._agentgym_rows = None
    with torch.no_grad():
        joined, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width)
    for b, episode in enumerate(batch.episodes):
        expected = []
        for row in episode.rows:
            with torch.no_grad():
                logits = model(torch.tensor([row.input_ids])).logits[0].float()
            lp = torch.log_softmax(logits[:-1], dim=-1)
            targets = torch.tensor(row.input_ids[1:])
            picked = lp.gather(1, targets[:, None])[:, 0]
            expected += [float(picked[k - 1]) for k, m in enumerate(row.loss_mask) if m]
        sampled = (output["completion_mask"][b] * output["tool_mask"][b]).bool()
        got = logps[b][sampled].tolist()
        assert got == pytest.approx(expected, abs=1e-4)
        if b == 0:  # the second row's ids scored with the first row in context differ
            assert joined[b][sampled].tolist() != pytest.approx(expected, abs=1e-4)
    # And a real step trains on it.
    trainer.train()
    assert trainer.state.global_step == 1


# ---------------------------------------------------------------------- the filter inside TRL

# 4 groups of 4 episodes. Unbiased reward stds: 0, 0.5774 (1/sqrt 3), 0.5, 0.
REWARDS = [[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
# Softmax over the stds: 0.184, 0.328, 0.304, 0.184; by mass g1, g2 (cumulative 0.632 >= 0.6), so
# top-p 0.6 keeps groups 1 and 2 (worked by hand; snr_filter gives the same below).
FILTER = FilterConfig(strategy="top_p", p=0.6)


def _fixed_reward(completions, **kwargs):
    return [r for group in REWARDS for r in group]


def _filtered_trainer(tmp_path: Path, loss_type: str):
    env_kwargs = {"action_format": "raw"}
    torch.manual_seed(0)
    model, tokenizer = _tiny("Bandit-v0", env_kwargs)
    rollout = AgentgymRollout("Bandit-v0", tokenizer, env_kwargs=env_kwargs, max_new_tokens=3)
    trainer = AgentgymGRPOTrainer(
        **_kwargs(model, tokenizer, rollout, 4, reward=_fixed_reward),
        args=_args(tmp_path, per_device_train_batch_size=16, loss_type=loss_type),
        snr_filter=FILTER,
        diagnostics=DiagnosticsConfig(every=0),
    )
    trainer.model.train()
    prompts = _prompts(rollout, 4, 4)
    output = trainer._generate_and_score_completions([{"prompt": p} for p in prompts])
    return trainer, output


def test_the_filter_inside_trl_drops_the_groups_snr_filter_drops(tmp_path: Path) -> None:
    trainer, output = _filtered_trainer(tmp_path, "dapo")
    expected = snr_filter(torch.tensor(REWARDS, dtype=torch.float64), FILTER)
    assert expected.kept.tolist() == [1, 2]  # the hand-worked choice above
    kept_rows = [g * 4 + n for g in (1, 2) for n in range(4)]
    for b in range(16):
        loss_mask = output["completion_mask"][b] * output["tool_mask"][b]
        if b in kept_rows:
            assert int(loss_mask.sum()) > 0
            assert float(output["advantages"][b]) != 0.0
        else:
            assert int(loss_mask.sum()) == 0 and float(output["advantages"][b]) == 0.0
    # the trained tokens of the kept rows (a closing EOS of a finished reply is not one)
    kept_tokens = sum(
        int((output["completion_mask"][b] * output["tool_mask"][b]).sum()) for b in kept_rows
    )
    assert int(output["num_items_in_batch"]) == kept_tokens
    logged = {k: v[-1] for k, v in trainer._metrics["train"].items()}
    assert logged["filter/num_groups"] == 4.0 and logged["filter/num_kept"] == 2.0
    assert logged["filter/num_zero_spread"] == 2.0
    assert logged["filter/tokens_after"] == float(kept_tokens)
    assert logged["rollout/in_group_reward_std"] == pytest.approx((0.57735 + 0.5) / 4, abs=1e-4)


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_the_filtered_loss_is_the_loss_over_the_kept_groups_alone(
    tmp_path: Path, loss_type: str
) -> None:
    """Old log-probs set to the current ones minus a shift d_b per row (0 to 0.15 nats, inside
    the clip range), so each token's loss is -r_b * A_b with r_b = exp(d_b). By hand: dapo (token
    mean) is -sum_kept(r_b A_b T_b) / sum_kept(T_b); grpo (mean of per-row means) is
    -mean_kept(r_b A_b); both equal TRL's loss on a batch of the kept rows alone, and so do the
    gradients (A: TRL's advantages of the kept groups, which the other groups do not change)."""
    trainer, output = _filtered_trainer(tmp_path, loss_type)
    trainer.current_gradient_accumulation_steps = 1
    kept = [g * 4 + n for g in (1, 2) for n in range(4)]
    ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
    mask = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
    with torch.no_grad():
        current, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, output["completion_ids"].size(1)
        )
    shift = torch.linspace(0.0, 0.15, 16)
    output["old_per_token_logps"] = current - shift[:, None]
    ratio = torch.exp(shift[kept])
    rewards = torch.tensor(REWARDS)  # TRL's advantages: (r - mean) / (std + 1e-4)
    mean, std = rewards.mean(1, keepdim=True), rewards.std(1, keepdim=True)
    advantages = ((rewards - mean) / (std + 1e-4)).flatten()[kept]
    loss_mask = output["completion_mask"] * output["tool_mask"]  # trained ids (not a closing EOS)
    tokens = torch.stack([loss_mask[b].sum() for b in kept]).float()
    if loss_type == "dapo":
        by_hand = -float((ratio * advantages * tokens).sum() / tokens.sum())
    else:
        by_hand = -float((ratio * advantages).mean())
    assert abs(by_hand) > 1e-3

    def loss_and_grads(inputs):
        trainer.model.zero_grad(set_to_none=True)
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        return float(loss.detach()), [p.grad.clone() for p in trainer.model.parameters()]

    filtered, grads = loss_and_grads(output)
    alone = {
        k: (v[kept] if isinstance(v, torch.Tensor) and v.dim() and len(v) == 16 else v)
        for k, v in output.items()
    }
    alone["advantages"] = advantages
    alone["num_items_in_batch"] = tokens.sum()
    reference, reference_grads = loss_and_grads(alone)
    assert filtered == pytest.approx(by_hand, rel=1e-4)
    assert reference == pytest.approx(by_hand, rel=1e-4)
    for a, b in zip(grads, reference_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


# ---------------------------------------------------------------------- the logged metrics


def test_mi_and_collapse_metrics_reach_trls_logs_after_one_step(tmp_path: Path) -> None:
    """Scripted think-answer replies give every episode a valid z, scored by the tiny model
    against the 2 distinct prompts: TRL's log holds the trainer's collapse/, filter/, rollout/
    names after one real step; the checkpoint holds the collapse tracker, and a resume reads it."""
    env_kwargs = {"max_turns": 1}
    model, tokenizer = _tiny("Sokoban-v0", env_kwargs)
    kwargs = _scripted(tmp_path, model, tokenizer, [("push the box", "Up")], env_kwargs)
    kwargs["args"] = _args(tmp_path, save_strategy="steps", save_steps=1)
    trainer = AgentgymGRPOTrainer(**kwargs, diagnostics=DiagnosticsConfig(permutations=19))
    trainer.train()
    checkpoint = tmp_path / "trl" / "checkpoint-1"
    saved = (checkpoint / "agentgym_collapse.json").read_text()
    assert saved == json.dumps(trainer.collapse_tracker.state_dict())  # NaN-safe: as text
    assert len(json.loads(saved)["history"]) == 1
    resumed = AgentgymGRPOTrainer(**kwargs, diagnostics=DiagnosticsConfig(permutations=19))
    resumed.create_optimizer_and_scheduler(num_training_steps=1)  # as train() does first
    resumed._load_optimizer_and_scheduler(str(checkpoint))
    assert json.dumps(resumed.collapse_tracker.state_dict()) == saved
    (logged,) = [h for h in trainer.state.log_history if "loss" in h]
    ours = {k for k in logged if k.split("/")[0] in ("collapse", "filter", "rollout", "timing")}
    assert ours <= set(METRIC_NAMES), ours - set(METRIC_NAMES)
    for name in (
        "collapse/mi_estimate",
        "collapse/retrieval_accuracy",
        "collapse/mi_zscore_ema",
        "collapse/num_prompts",
        "collapse/valid_thinking_rate",
        "collapse/state_insufficient_sample",
        "filter/num_kept",
        "filter/kept_fraction",
        "rollout/reward_mean",
        "rollout/valid_action_rate",
        "timing/generation_s",
    ):
        assert name in logged, name
    assert logged["collapse/num_prompts"] == 2.0 and logged["collapse/valid_thinking_rate"] == 1.0


# ---------------------------------------------------------------------- the README


def test_the_readme_snippet_runs_one_step(tmp_path: Path, monkeypatch) -> None:
    """The README's TRL block as written, with max_steps=1 and the output in tmp_path."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### With Hugging Face TRL") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "max_steps=2" in code and 'output_dir="runs/trl"' in code
    code = code.replace("max_steps=2", "max_steps=1")
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    trainer = scope["trainer"]
    assert trainer.state.global_step == 1
    (logged,) = [h for h in trainer.state.log_history if "loss" in h]
    assert "filter/num_kept" in logged and "collapse/num_pairs_total" in logged


def test_the_multi_gpu_recipe_runs_one_cpu_step_and_its_configs_parse(tmp_path: Path) -> None:
    """The recipe's script in one CPU process with the tiny model (its GPU launch is untested
    here); the accelerate configs it ships name DeepSpeed ZeRO-3 and FSDP2 with bf16."""
    import yaml

    from baselines.integrations.trl_recipe import main

    out = tmp_path / "recipe"
    argv = ["--model", "tiny", "--env", "Bandit-v0", "--env-kwargs", '{"action_format": "raw"}']
    argv += ["--num-prompts", "2", "--num-generations", "4", "--batch-size", "8"]
    argv += ["--max-new-tokens", "2", "--max-steps", "1", "--cpu", "--output-dir", str(out)]
    assert main([*argv, "--report-to"]) == 0
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    folder = ROOT / "baselines" / "configs" / "trl"
    zero3 = yaml.safe_load((folder / "deepspeed_zero3.yaml").read_text())
    assert zero3["distributed_type"] == "DEEPSPEED"
    assert zero3["deepspeed_config"]["zero_stage"] == 3 and zero3["mixed_precision"] == "bf16"
    fsdp = yaml.safe_load((folder / "fsdp.yaml").read_text())
    assert fsdp["distributed_type"] == "FSDP" and fsdp["fsdp_config"]["fsdp_version"] == 2


def test_episode_return_and_short_ids() -> None:
    assert episode_return([None, None], episode_return=[1, -0.5]) == [1.0, -0.5]
    with pytest.raises(ValueError, match="unknown environment id 'Nope-v0'"):
        AgentgymRollout("Nope-v0", tokenizer=None)
    with pytest.raises(TypeError, match="rollout_func=AgentgymRollout"):
        AgentgymGRPOTrainer(model=None, rollout_func=lambda prompts, trainer: {})


class _LengthEngine(FakeEngine):
    """Replies ``<answer> 1 </answer>`` padded to ``1 + (7 i) % 5`` ids for the i-th prompt of a
    call (no end id), so the episodes' policy-token counts are known by hand."""

    name = "lengths"
    provides_logprobs = True

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompt_ids, sampling):
        from baselines.llm.engines import Generation

        word = self.tokenizer.convert_tokens_to_ids("1")
        out = []
        for i in range(len(prompt_ids)):
            ids = [word] * (1 + (7 * i) % 5)
            out.append(Generation(ids, self.tokenizer.decode(ids), [-1.0] * len(ids), False))
        return out


@pytest.mark.parametrize("metric", ["length", "entropy"])
def test_the_filter_inside_trl_reads_lengths_and_entropies(tmp_path: Path, metric: str) -> None:
    """``filter.metric`` length: the episodes' sampled-token counts 1 + (7 i) % 5 by hand give
    group means 2.75, 3.25, 2.5, 3.0 (i = 0..15), so top_k_abs k=2 keeps groups 1 and 3. entropy: the mean token entropy of each episode's sampled ids, computed
    here from the model's logits, through snr_filter gives the same kept groups as TRL's."""
    env_kwargs = {"action_format": "raw"}
    torch.manual_seed(0)
    model, tokenizer = _tiny("Bandit-v0", env_kwargs)
    engine = _LengthEngine(tokenizer) if metric == "length" else None
    rollout = AgentgymRollout(
        "Bandit-v0", tokenizer, env_kwargs=env_kwargs, max_new_tokens=4, engine=engine
    )
    config = FilterConfig(strategy="top_k_abs", k=2, metric=metric)
    trainer = AgentgymGRPOTrainer(
        **_kwargs(model, tokenizer, rollout, 4, reward=_fixed_reward),
        args=_args(tmp_path, per_device_train_batch_size=16),
        snr_filter=config,
        diagnostics=DiagnosticsConfig(every=0),
    )
    trainer.model.train()
    output = trainer._generate_and_score_completions(
        [{"prompt": p} for p in _prompts(rollout, 4, 4)]
    )
    trained = (output["completion_mask"] * output["tool_mask"]).sum(1)
    kept_groups = sorted({b // 4 for b in range(16) if int(trained[b]) > 0})
    if metric == "length":
        lengths = [[1 + (7 * (g * 4 + n)) % 5 for n in range(4)] for g in range(4)]
        assert [sum(len(t.sample.sampled_ids) for t in e.turns) for e in rollout.last.episodes] == [
            x for group in lengths for x in group
        ]
        assert kept_groups == [1, 3]
        return
    entropies = []
    for episode in rollout.last.episodes:
        (row,) = episode.rows
        with torch.no_grad():
            logits = model(torch.tensor([row.input_ids])).logits[0, :-1].float()
        p = torch.log_softmax(logits, dim=-1)
        h = -(p.exp() * p).sum(-1)
        sampled = torch.tensor(row.loss_mask[1:], dtype=torch.bool)
        entropies.append(float(h[sampled].mean()))
    expected = snr_filter(
        torch.tensor(REWARDS, dtype=torch.float64),
        config,
        entropies=torch.tensor(entropies, dtype=torch.float64).view(4, 4),
    )
    assert kept_groups == expected.kept.tolist()
