"""Trainer configs: YAML into typed dataclasses, overrides, and errors that name the key."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from baselines.config import SAMPLING_FIELDS, TrainConfig, load_config, sampling_settings
from baselines.sft import load_sft_config

CONFIG_DIR = Path(__file__).resolve().parent.parent / "baselines" / "configs"
#: run_main_table_diff_algo.sh:270-274: softmax top_p 0.9 on the reward std, largest,
#: zero-spread groups included (strategy, p, mass_mode, metric, keep, include_zero).
MAIN_TABLE_FILTER = ("top_p", 0.9, "softmax", "std", "largest", True)


def _filter_settings(config: TrainConfig) -> tuple:
    f = config.filter
    return (f.strategy, f.p, f.mass_mode, f.metric, f.keep, f.include_zero)


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path: Path) -> None:
    config = load_config(path)
    assert isinstance(config, TrainConfig)


def test_quick_config_is_the_main_job() -> None:
    config = load_config(CONFIG_DIR / "quick.yaml")
    assert config.model.path == "embedded" and config.rollout.env_id == "agentgym/Bandit-v0"


def test_defaults_and_overrides() -> None:
    config = load_config(None)
    assert (config.algorithm.clip_low, config.algorithm.clip_high) == (0.2, 0.28)
    assert config.filter.strategy == "top_p" and config.filter.p == 0.9
    config = load_config(
        None,
        [
            "algorithm.name=ppo",
            "rollout.env_kwargs={max_turns: 2}",
            "filter.strategy=top_k_abs",
            "filter.k=3",
            "model.lora_rank=8",
        ],
    )
    assert config.algorithm.name == "ppo"
    assert config.rollout.env_kwargs == {"max_turns": 2}
    assert (config.filter.strategy, config.filter.k) == ("top_k_abs", 3)
    assert config.model.lora_rank == 8


def test_scientific_notation_without_a_dot_is_a_number(tmp_path: Path) -> None:
    # PyYAML (YAML 1.1) reads 1e-4 as the string "1e-4"; a float setting takes it as 0.0001.
    config = load_config(None, ["algorithm.lr=1e-4", "algorithm.kl_coef=2E-3", "filter.p=5e-1"])
    assert (config.algorithm.lr, config.algorithm.kl_coef, config.filter.p) == (1e-4, 2e-3, 0.5)
    path = tmp_path / "c.yaml"
    path.write_text("algorithm:\n  lr: 3e-6\n", encoding="utf-8")
    assert load_config(path).algorithm.lr == 3e-6
    with pytest.raises(ValueError, match="algorithm.lr: expected a number, got '1e-x'"):
        load_config(None, ["algorithm.lr=1e-x"])
    with pytest.raises(ValueError, match="train.steps: expected a whole number"):
        load_config(None, ["train.steps=1e3"])  # a whole-number setting stays strict


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.bogus=1", "algorithm.bogus: unknown key"),
        ("bogus.key=1", "bogus: unknown key"),
        ("algorithm.name=sac", "algorithm.name: must be one of"),
        ("algorithm.clip_high=-0.1", "algorithm.clip_high: must be >= 0"),
        ("algorithm.clip_low=1.5", "algorithm.clip_low: must be < 1"),
        ("rollout.top_p=0", "rollout.top_p: must lie in (0, 1]"),
        ("rollout.env_id=agentgym/Nope-v0", "rollout.env_id: unknown id"),
        ("train.steps=1.5", "train.steps: expected a whole number"),
        ("train.steps=0", "train.steps: must be >= 1"),
        ("rollout.think_prefix=maybe", "rollout.think_prefix: expected true or false"),
        ("filter.strategy=best", "filter: strategy must be one of"),
        ("filter.p=2", "filter: p must be a number in (0, 1]"),
        ("diagnostics.turn=last", "diagnostics.turn: must be one of"),
        ("algorithm.critic=shared", "algorithm.critic: must be one of ['head', 'model']"),
        ("train.steps", "expected key=value"),
        (
            "rollout.env_kwargs={bad",
            "override 'rollout.env_kwargs={bad': the value is not valid YAML",
        ),
        (
            "rollout.env_kwargs={bogus: 1}",
            "rollout.env_kwargs: agentgym/Bandit-v0 takes no argument 'bogus'",
        ),
        ("rollout.env_kwargs={max_turns: 0}", "rollout.env_kwargs: max_turns must be an int >= 1"),
    ],
)
def test_bad_values_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        load_config(None, [override])
    assert message in str(err.value)


def test_yaml_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n- not sections\n")
    with pytest.raises(ValueError, match="top level must be a mapping"):
        load_config(bad)
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: [1, 2\n")
    with pytest.raises(ValueError, match="broken.yaml: not valid YAML"):
        load_config(broken)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("rollout:\n  groups: 4\n")
    with pytest.raises(ValueError, match="rollout.groups: unknown key"):
        load_config(unknown)


def test_defaults_match_ragen2_main_table():
    # run_main_table_diff_algo.sh:262-274: entropy 0.001, no KL loss, softmax top_p 0.9 on the
    # reward std, largest, zero-spread groups included.
    config = load_config(None, [])
    assert (config.algorithm.entropy_coef, config.algorithm.kl_coef) == (0.001, 0.0)
    assert _filter_settings(config) == MAIN_TABLE_FILTER


@pytest.mark.parametrize(
    "name",
    ["bandit", "frozen_lake", "countdown", "sokoban", "quick", "sokoban_cpu", "frozen_lake_cpu"],
)
def test_shipped_configs_use_the_main_table_filter(name):
    config = load_config(CONFIG_DIR / f"{name}.yaml", [])
    assert (config.filter.mass_mode, config.filter.include_zero, config.filter.p) == (
        "softmax",
        True,
        0.9,
    )
    assert config.algorithm.entropy_coef == 0.001


def test_ragen_filter_names_and_no_filter_arm():
    config = load_config(None, ["filter.metric=reward_variance", "filter.p=1.0"])
    assert (config.filter.metric, config.filter.p) == ("std", 1.0)
    assert (
        load_config(None, ["algorithm.ppo_mini_batch_size=32"]).algorithm.ppo_mini_batch_size == 32
    )
    with pytest.raises(ValueError, match="ppo_mini_batch_size"):
        load_config(None, ["algorithm.ppo_mini_batch_size=-1"])


def test_a_section_written_twice_is_an_error(tmp_path: Path) -> None:
    """PyYAML keeps the last of two equal keys silently; the config loader refuses them."""
    path = tmp_path / "twice.yaml"
    path.write_text("train:\n  steps: 3\nrollout:\n  group_size: 2\ntrain:\n  out_dir: x\n")
    with pytest.raises(ValueError, match="'train' is written twice"):
        load_config(path)


@pytest.mark.parametrize("algorithm", ["grpo", "drgrpo"])
def test_group_relative_algorithms_refuse_one_episode_groups(algorithm: str) -> None:
    """A one-episode group has advantage 0 under GRPO/Dr.GRPO (docs/ragen2.md): refused."""
    with pytest.raises(ValueError, match="rollout.group_size: .* at least 2"):
        load_config(None, [f"algorithm.name={algorithm}", "rollout.group_size=1"])
    assert load_config(None, ["algorithm.name=ppo", "rollout.group_size=1"]).rollout.group_size == 1


@pytest.mark.parametrize("algorithm", ["grpo", "drgrpo"])
def test_a_critic_model_needs_ppo(algorithm: str) -> None:
    """GRPO and Dr.GRPO read no values: a critic model would be loaded and never used."""
    with pytest.raises(ValueError) as err:
        load_config(None, [f"algorithm.name={algorithm}", "algorithm.critic=model"])
    message = str(err.value)
    assert message.startswith("algorithm.critic: model trains a critic for PPO")
    assert "set algorithm.critic=head or algorithm.name=ppo" in message
    assert load_config(None, [f"algorithm.name={algorithm}"]).algorithm.critic == "head"
    assert load_config(None, ["algorithm.name=ppo", "algorithm.critic=model"]).algorithm.critic


def test_validation_seeds_must_not_overlap_training_seeds():
    # Steps 0..99 of 8 groups use seeds 0..799; validation at 500..515 would replay some.
    with pytest.raises(ValueError, match=r"rollout.val_seed: validation seeds 500..515 overlap"):
        load_config(None, ["train.steps=100", "rollout.num_groups=8", "rollout.val_seed=500"])
    # Seeds 0..799 and 800..815 are disjoint.
    load_config(None, ["train.steps=100", "rollout.num_groups=8", "rollout.val_seed=800"])


def test_train_help_lists_every_config_key(capsys):
    import dataclasses

    from baselines.train import main

    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    for section in dataclasses.fields(TrainConfig):
        for f in dataclasses.fields(getattr(TrainConfig(), section.name)):
            assert f"{section.name}.{f.name}=" in shown, f"{section.name}.{f.name}"


def test_flags_may_sit_between_overrides(capsys):
    # `python -m baselines.train model.path=tiny --no-progress bogus.key=1`: the override after
    # the flag is read (and refused by name), not "unrecognized arguments".
    from baselines.sft import main as sft_main
    from baselines.train import main

    with pytest.raises(SystemExit):
        main(["model.path=tiny", "--no-progress", "bogus.key=1"])
    err = capsys.readouterr().err
    assert "bogus" in err and "unrecognized arguments" not in err
    assert sft_main(["model.path=tiny", "--quiet", "sft.bogus=1"]) == 2
    err = capsys.readouterr().err
    assert "sft.bogus" in err and "unrecognized arguments" not in err


@pytest.mark.parametrize("name", ["sokoban", "frozen_lake"])
def test_paper_faithful_configs_hold_ragens_settings(name: str) -> None:
    """baselines/configs/ragen2/*.yaml against the values read by hand from mll-lab-nu/RAGEN at
    20daedc (config/base.yaml, config/envs.yaml, config/_3_frozen_lake.yaml and
    scripts/runs/run_main_table_diff_algo.sh); each env's settings make an env whose limits are
    RAGEN's: 5 turns, 2 actions a turn, 10 actions an episode."""
    import gymnasium as gym

    config = load_config(CONFIG_DIR / "ragen2" / f"{name}.yaml")
    rc, ac, tc = config.rollout, config.algorithm, config.train
    assert (rc.num_groups, rc.group_size, rc.max_new_tokens, rc.temperature) == (8, 16, 120, 1.0)
    assert (rc.val_episodes, rc.val_temperature, rc.val_every) == (512, 0.5, 10)
    assert (rc.engine, rc.max_context_tokens) == ("vllm", 3600)
    assert (rc.vllm_gpu_memory_utilization, rc.vllm_tensor_parallel_size) == (0.3, 1)
    assert (ac.name, ac.gamma, ac.lam, ac.turn_rewards) == ("ppo", 1.0, 1.0, False)
    assert (ac.lr, ac.critic_lr, ac.clip_low, ac.clip_high) == (1e-6, 1e-5, 0.2, 0.28)
    assert (ac.entropy_coef, ac.kl_coef, ac.ppo_mini_batch_size) == (0.001, 0.0, 32)
    # Main table PPO: token-mean (run_main_table_diff_algo.sh:229-231); verl's dual clip, 3.0.
    assert (ac.loss_agg_mode, ac.agg_mode, ac.clip_ratio_c) == ("token-mean", "token-mean", 3.0)
    # A separate critic from the policy's checkpoint, own AdamW at lr 1e-5 (config/base.yaml:76-87).
    assert ac.critic == "model"
    assert _filter_settings(config) == MAIN_TABLE_FILTER
    assert (config.diagnostics.every, config.diagnostics.max_pairs) == (5, 64)
    assert (tc.steps, tc.save_every, tc.max_steps_without_update) == (400, 100, 5)
    assert tc.reward_variance_stop and tc.max_steps_without_signal == 0
    env = gym.make(rc.env_id, **rc.env_kwargs)
    try:
        inner = env.unwrapped
        assert (inner.max_turns, inner.max_actions_per_turn, inner.max_steps) == (5, 2, 10)
    finally:
        env.close()
    if name == "frozen_lake":
        assert rc.env_kwargs["p"] == 0.9 and rc.env_kwargs["is_slippery"] is False
    else:
        assert rc.env_kwargs["dim_room"] == [6, 6] and rc.env_kwargs["num_boxes"] == 1


def test_vllm_engine_settings_are_checked() -> None:
    config = load_config(
        None, ["rollout.vllm_gpu_memory_utilization=0.85", "rollout.vllm_tensor_parallel_size=4"]
    )
    assert (
        config.rollout.vllm_gpu_memory_utilization,
        config.rollout.vllm_tensor_parallel_size,
    ) == (
        0.85,
        4,
    )
    with pytest.raises(ValueError, match="rollout.vllm_gpu_memory_utilization: a share"):
        load_config(None, ["rollout.vllm_gpu_memory_utilization=1.5"])
    with pytest.raises(ValueError, match="rollout.vllm_tensor_parallel_size"):
        load_config(None, ["rollout.vllm_tensor_parallel_size=0"])


def test_yaml_merge_keys_still_load(tmp_path: Path) -> None:
    """The strict loader refuses a key written twice, not YAML merge keys (``<<: *anchor``), which
    ``yaml.safe_load`` reads; a merged key overridden in the same mapping is not a duplicate."""
    base = tmp_path / "merge2.yaml"
    base.write_text("model:\n  <<: {path: tiny, dtype: float32}\n  dtype: float32\n")
    assert load_sft_config(base, ["sft.data=x.jsonl"]).model.path == "tiny"


@pytest.mark.parametrize(
    "content",
    [b"? [a, b]\n: 1\n", b"\xff\xfe train: {}\n"],
    ids=["unhashable-key", "not-utf8"],
)
def test_a_bad_file_is_a_value_error_naming_it(tmp_path: Path, content: bytes) -> None:
    """An unhashable key and a file that is not UTF-8 are ValueErrors naming the file (not a
    TypeError from the duplicate check or a UnicodeDecodeError)."""
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="bad.yaml"):
        load_config(path)


def test_sampling_settings_is_the_one_map_from_rollout_settings() -> None:
    """Issue 40: the trainer (a RolloutConfig), the ``hf:`` agent (its arguments, a mapping) and
    the TRL rollout (its attributes, plus TRL's temperature and top-p) all go through
    :func:`sampling_settings`; a field the source lacks keeps the SamplingSettings default."""
    from baselines.llm.engines import SamplingSettings

    rc = load_config(
        None,
        [
            "rollout.max_new_tokens=32",
            "rollout.temperature=0.7",
            "rollout.top_p=0.9",
            "rollout.think_prefix=false",
            "rollout.max_context_tokens=512",
        ],
    ).rollout
    assert sampling_settings(rc) == SamplingSettings(32, 0.7, 0.9, False, 512)
    assert set(SAMPLING_FIELDS) <= set(vars(rc))  # every field read is a RolloutConfig field
    # The hf: agent's arguments: converted as it always did (int, float, bool); others ignored.
    args = {"max_new_tokens": "8", "temperature": 0, "top_p": 1, "think_prefix": 1, "seed": 3}
    made = sampling_settings(args)
    assert made == SamplingSettings(8, 0.0, 1.0, True, 4096)
    assert type(made.max_new_tokens) is int and type(made.temperature) is float
    # The TRL rollout: its own attributes, TRL's temperature and top-p, its stop strings.
    held = types.SimpleNamespace(max_new_tokens=16, think_prefix=True, max_context_tokens=1024)
    made = sampling_settings(held, temperature=1, top_p=0.95, stop_strings=("</a>",))
    assert made == SamplingSettings(16, 1.0, 0.95, True, 1024, ("</a>",))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algorithm.clip_ratio_c=1.0", "algorithm.clip_ratio_c: dual-clip PPO's bound must be > 1"),
        ("algorithm.loss_agg_mode=sum", "algorithm.loss_agg_mode: must be one of"),
        ("algorithm.loss_agg_horizon=0", "algorithm.loss_agg_horizon: must be >= 1"),
    ],
)
def test_loss_safety_settings_are_checked(override: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_config(None, [override])


@pytest.mark.parametrize(
    ("algorithm", "mode"),
    [("ppo", "token-mean"), ("grpo", "token-mean"), ("drgrpo", "seq-mean-token-sum-norm")],
)
def test_loss_agg_mode_auto_takes_the_algorithms_default(algorithm: str, mode: str) -> None:
    config = load_config(None, [f"algorithm.name={algorithm}"])
    assert (config.algorithm.loss_agg_mode, config.algorithm.agg_mode) == ("auto", mode)
