"""The study's warm-start gate (baselines/studies/gate.py): its rule by hand, and its MI check
on a policy that cannot depend on its input (a random-init model: the negative control)."""

from __future__ import annotations

import math

import pytest

from baselines.studies.gate import GATE_SEED, gate_reasons, gate_settings, oracle_mi


def test_gate_rule_by_hand() -> None:
    assert gate_reasons(1.0, 2.0, 0.5) == []  # half the ceiling, success mid-range: passes
    assert gate_reasons(0.99, 2.0, 0.5)[0].startswith("the oracle reasoning MI is 0.990 nats, 0.49")
    assert gate_reasons(1.5, 2.0, 0.05) == [
        "validation success 0.050 is at its floor (needs > 0.05)"
    ]
    assert gate_reasons(1.5, 2.0, 0.95) == [
        "validation success 0.950 is at its ceiling (needs < 0.95)"
    ]
    assert len(gate_reasons(math.nan, 2.0, math.nan)) == 2
    assert len(gate_reasons(1.0, 0.0, 0.5)) == 1  # no ceiling: no share to reach


def test_random_init_model_fails_the_mi_check() -> None:
    """The FrozenLake fault of the earlier study: a model whose reasoning carries nothing about
    its prompt (here a random-init tiny policy) scores the oracle's reasoning at MI near 0."""
    from baselines.episodes import vocabulary_texts
    from baselines.llm.policy import load_policy

    env_id = "agentgym/Bandit-v0"
    texts = vocabulary_texts(env_id, {}, range(32))
    model, tokenizer = load_policy("tiny", device="cpu", dtype="float32", texts=texts, seed=0)
    out = oracle_mi(model, tokenizer, env_id, {}, range(GATE_SEED, GATE_SEED + 16))
    assert out["num_episodes"] == 16 and out["mi_upper_bound"] > 1.0
    share = out["mi_estimate"] / out["mi_upper_bound"]
    assert share < 0.1
    assert gate_reasons(out["mi_estimate"], out["mi_upper_bound"], 0.5) != []
    with pytest.raises(ValueError, match="at least 2"):
        oracle_mi(model, tokenizer, env_id, {}, range(GATE_SEED, GATE_SEED + 1))


def test_gate_command_refuses_bad_input_with_the_fix(tmp_path, capsys) -> None:
    """Bad input is exit 2 with a message naming the fix (exit 1 means "the gate failed"): the
    SFT run's folder given instead of its checkpoint/, no validation episode, one oracle chat."""
    from baselines.studies.gate import main

    run = tmp_path / "sft"
    (run / "checkpoint").mkdir(parents=True)
    (run / "checkpoint" / "config.json").write_text("{}")
    cases = [
        ([str(run)], "holds no model (no config.json)"),
        ([str(run / "checkpoint"), "rollout.val_episodes=0"], "at least 1 validation episode"),
        ([str(run / "checkpoint"), "--oracle-episodes", "1"], "--oracle-episodes must be >= 2"),
        ([str(tmp_path / "nowhere")], "no checkpoint folder"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as stop:
            main([*argv, "--env", "agentgym/Bandit-v0"])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert message in err, err
    # The hint names the folder the user meant.
    with pytest.raises(SystemExit):
        main([str(run), "--env", "agentgym/Bandit-v0"])
    assert f"e.g. {run / 'checkpoint'}" in capsys.readouterr().err


def test_gate_settings_take_the_flags_over_the_spec_over_the_defaults(tmp_path) -> None:
    """A spec's gate section and common overrides reach the command as the study uses them; a
    flag given wins over the spec, the spec over the defaults (32 chats, 0.5, 0.05, 0.95); the
    command's overrides come after the spec's, so the later one wins in the trainer's config."""
    from baselines.studies.ragen2 import load_study

    path = tmp_path / "spec.yaml"
    path.write_text(
        "common: [rollout.val_episodes=64, rollout.val_temperature=0.5]\n"
        "gate: {oracle_episodes: 8, mi_fraction: 0.3, success_ceiling: 0.9}\n"
        "claims:\n  correlation: {envs: [agentgym/Bandit-v0], seeds: [0], arms: {a: []}}\n"
    )
    spec = load_study(path)
    given = {"oracle_episodes": None, "mi_fraction": None, "success_floor": None}
    given |= {"success_ceiling": 0.8, "overrides": ["rollout.val_episodes=16"]}
    overrides, oracle, thresholds = gate_settings(spec, given)
    assert overrides == [
        "rollout.val_episodes=64",
        "rollout.val_temperature=0.5",
        "rollout.val_episodes=16",
    ]
    assert oracle == 8
    assert thresholds == {"mi_fraction": 0.3, "success_floor": 0.05, "success_ceiling": 0.8}
    assert gate_settings(None, {}) == (
        [],
        32,
        {"mi_fraction": 0.5, "success_floor": 0.05, "success_ceiling": 0.95},
    )


def test_gate_command_refuses_a_bad_spec_with_the_fix(tmp_path, capsys) -> None:
    """A missing or empty spec, and a gate section with a misspelt key (it would otherwise be
    ignored, or fail deep in the study), are exit 2 naming the file and the keys it may set."""
    from baselines.studies.gate import main

    checkpoint = tmp_path / "sft" / "checkpoint"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    typo = tmp_path / "typo.yaml"
    typo.write_text(
        "gate: {mi_frac: 0.3}\n"
        "claims:\n  correlation: {envs: [agentgym/Bandit-v0], seeds: [0], arms: {a: []}}\n"
    )
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    for spec, message in (
        (tmp_path / "nowhere.yaml", "nowhere.yaml"),
        (empty, "a study spec is a mapping with claims (got NoneType)"),
        (typo, "keys ['mi_frac'] are unknown; it may set oracle_episodes, mi_fraction"),
    ):
        with pytest.raises(SystemExit) as stop:
            main([str(checkpoint), "--env", "agentgym/Bandit-v0", "--spec", str(spec)])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "--spec:" in err and message in err, err
