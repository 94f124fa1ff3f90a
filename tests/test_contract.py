"""The environment contract of DESIGN.md, checked over every registered id.

Everything here is written over ``agentgym.registered_envs()``: a new id is covered as soon as it is
registered. An id whose entry-point module does not exist yet is skipped (the reason says which
module); any other failure to build it fails its tests.
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
import warnings
from typing import Any

import gymnasium
import pytest
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import agentgym
from agentgym.parsing import format_answer
from agentgym.registration import EnvKwargsError, maker_name
from agentgym.text_env import RESET_INFO_KEYS, STEP_INFO_KEYS
from tests.golden_update import policy_answer

ENV_IDS = list(agentgym.registered_envs())
AVAILABLE = ENV_IDS


def _params(ids: list[str] = ENV_IDS) -> list[Any]:
    return [pytest.param(env_id, id=env_id) for env_id in ids]


def _make(env_id: str, **kwargs: Any) -> gymnasium.Env:
    return gymnasium.make(env_id, **kwargs)


def _check_reset_info(info: dict[str, Any]) -> None:
    missing = [key for key in RESET_INFO_KEYS if key not in info]
    assert missing == [], f"reset info lacks {missing}"
    assert isinstance(info["instructions"], str) and info["instructions"]
    assert info["turn"] == 0


def _check_step_info(info: dict[str, Any]) -> None:
    missing = [key for key in STEP_INFO_KEYS if key not in info]
    assert missing == [], f"step info lacks {missing}"
    assert isinstance(info["action_is_valid"], bool)
    assert isinstance(info["action_is_effective"], bool)
    assert isinstance(info["success"], bool)
    assert isinstance(info["actions"], tuple)
    assert isinstance(info["dropped_actions"], tuple)
    assert len(info["actions"]) <= info["max_actions_per_turn"]


def _oracle_or_first(env: gymnasium.Env) -> list[str]:
    """Action pieces that the env recognises now: the oracle's, else the first valid action."""
    inner = env.unwrapped
    try:
        return list(inner.oracle_actions())
    except NotImplementedError:
        return list((inner.valid_actions() or ["?"])[:1])


# ----------------------------------------------------------------------------- Gymnasium checks


@pytest.mark.parametrize("env_id", _params())
def test_gymnasium_env_checker_passes(env_id: str) -> None:
    env = _make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker reports problems as warnings: none allowed
        check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize(
    ("mode", "num_envs"), [("sync", 3), ("async", 2)], ids=["sync-3", "async-2"]
)
@pytest.mark.parametrize("env_id", _params())
def test_vector_env_matches_single_envs(env_id: str, mode: str, num_envs: int) -> None:
    """make_vec resets and steps; each sub-env's strings equal a single env's for the same seed."""
    seeds = [11 + i for i in range(num_envs)]
    singles = [_make(env_id) for _ in seeds]
    expected = [env.reset(seed=seed)[0] for env, seed in zip(singles, seeds, strict=True)]
    vec = gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode)
    try:
        observations, infos = vec.reset(seed=seeds)
        assert isinstance(observations, tuple)
        assert all(isinstance(o, str) for o in observations)
        assert list(observations) == expected
        assert "instructions" in infos
        for _ in range(3):
            actions = [policy_answer(env)[1] for env in singles]
            steps = [env.step(a) for env, a in zip(singles, actions, strict=True)]
            observations, rewards, terminated, truncated, infos = vec.step(actions)
            assert list(observations) == [s[0] for s in steps]
            assert rewards.tolist() == [float(s[1]) for s in steps]
            assert terminated.tolist() == [s[2] for s in steps]
            assert truncated.tolist() == [s[3] for s in steps]
            assert infos["action_is_valid"].tolist() == [s[4]["action_is_valid"] for s in steps]
            if any(s[2] or s[3] for s in steps):
                break  # the vector env autoresets from here on; the single envs do not
    finally:
        vec.close()
        for env in singles:
            env.close()


# ----------------------------------------------------------------------------- bad actions

HUNDRED_KB = "x" * 100_000
#: Inputs that must never raise, each invalid in every environment's default format.
BAD_ACTIONS: dict[str, object] = {
    "empty": "",
    "whitespace": " \n\t ",
    "100kB-plain": HUNDRED_KB,
    "100kB-in-tags": f"<think>{HUNDRED_KB}</think><answer>{HUNDRED_KB} || {HUNDRED_KB}</answer>",
    "unclosed-answer": "<think>a</think><answer>Up",
    "unclosed-think": "<think>a<answer>Up</answer>",
    "close-before-open": "</think>a<think><answer>Up</answer>",
    "nested-answer": "<think>a</think><answer><answer>Up</answer></answer>",
    "nested-think": "<think><think>a</think></think><answer>Up</answer>",
    "repeated-answer": "<think>a</think><answer>Up</answer><answer>Up</answer>",
    "interleaved": "<think>a<answer>b</think>c</answer>",
    "think-only": "<think>a</think>",
    "empty-answer": "<think>a</think><answer>  </answer>",
    "empty-piece": "<think>a</think><answer>Up || || Up</answer>",
    "text-after": "<think>a</think><answer>Up</answer> and then",
    "none": None,
    "int": 3,
    "bytes": b"<think>a</think><answer>Up</answer>",
    "list": ["Up"],
}


def _assert_rejected(
    env: gymnasium.Env, obs0: str, info0: dict[str, Any], step: tuple, policy: str, penalty: float
) -> None:
    """The outcome of an invalid turn under ``policy`` (text_env.py's module docstring)."""
    obs, reward, terminated, truncated, info = step
    _check_step_info(info)
    assert info["action_is_valid"] is False
    assert isinstance(info["invalid_reason"], str) and info["invalid_reason"]
    assert info["executed_actions"] == ()
    assert info["action_is_effective"] is False
    assert obs == obs0, "an invalid turn leaves the state unchanged"
    assert env.render() == obs0
    assert info["actions_left"] == info0["actions_left"]
    if policy == "noop":
        assert reward == 0.0 and info["format_penalty"] == 0.0
        assert terminated is (
            info["turn"] >= info["max_turns"] and env.unwrapped.turn_limit_terminates
        )
    else:
        assert reward == penalty and info["format_penalty"] == penalty
        if policy == "terminate":
            assert terminated is True


@pytest.mark.parametrize("policy", ["penalize", "terminate", "noop"])
@pytest.mark.parametrize("env_id", _params())
def test_bad_actions_follow_the_invalid_action_policy(env_id: str, policy: str) -> None:
    env = _make(env_id, invalid_action=policy)
    for name, action in BAD_ACTIONS.items():
        obs0, info0 = env.reset(seed=3)
        step = env.step(action)  # type: ignore[arg-type]
        try:
            _assert_rejected(env, obs0, info0, step, policy, penalty=-0.1)
        except AssertionError as err:
            raise AssertionError(f"bad action {name!r}: {err}") from err
    env.close()


@pytest.mark.parametrize("env_id", _params())
def test_non_str_action_reason(env_id: str) -> None:
    env = _make(env_id)
    env.reset(seed=0)
    *_, info = env.step(None)  # type: ignore[arg-type]
    assert info["invalid_reason"] == "action must be a str, got NoneType"
    env.close()


@pytest.mark.parametrize("env_id", _params())
def test_format_penalty_is_configurable(env_id: str) -> None:
    env = _make(env_id, format_penalty=-0.5)
    obs0, info0 = env.reset(seed=0)
    step = env.step("no tags at all")
    _assert_rejected(env, obs0, info0, step, "penalize", penalty=-0.5)
    assert "missing <think>" in step[4]["invalid_reason"]
    env.close()
    with pytest.raises(ValueError, match="format_penalty"):
        _make(env_id, format_penalty=0.5)


@functools.cache
def _first_moves(env_id: str) -> tuple[str, ...]:
    """The oracle's first move at seed 0 (made once per id: a browser env starts a browser)."""
    env = _make(env_id)
    env.reset(seed=0)
    moves = tuple(_oracle_or_first(env))
    env.close()
    return moves


def _foreign_actions(env_id: str) -> list[str]:
    """Actions that other environments recognise (their oracle's first move at seed 0)."""
    out = []
    for other in AVAILABLE:
        if other.split("-v")[0] == env_id.split("-v")[0]:
            continue
        out.extend(_first_moves(other))
    return sorted(set(out))


@pytest.mark.parametrize("env_id", _params())
def test_action_of_another_env(env_id: str) -> None:
    """Another game's action never raises; where this env does not know it, the turn is invalid."""
    env = _make(env_id)
    for foreign in [*_foreign_actions(env_id), "Up", "Push the box"]:
        obs0, info0 = env.reset(seed=0)
        step = env.step(format_answer([foreign], "think_answer", think="t"))
        _check_step_info(step[4])
        if not step[4]["action_is_valid"]:
            _assert_rejected(env, obs0, info0, step, "penalize", penalty=-0.1)
            assert "unrecognised action" in step[4]["invalid_reason"]
    env.close()


def test_sokoban_move_is_invalid_in_bandit() -> None:
    """Hand-worked: Bandit's arms are names or 1/2, so a Sokoban move is an unrecognised action."""
    env = _make("agentgym/Bandit-v0")
    obs0, info0 = env.reset(seed=0)
    step = env.step("<think>push</think><answer>Up</answer>")
    assert step[1:4] == (-0.1, True, False)  # one pull allowed: the wasted turn ends the episode
    assert step[4]["invalid_reason"] == "unrecognised action(s): 'Up'"
    _assert_rejected(env, obs0, info0, step, "penalize", penalty=-0.1)


@pytest.mark.parametrize("env_id", _params())
def test_more_actions_than_allowed_are_dropped(env_id: str) -> None:
    env = _make(env_id)
    env.reset(seed=0)
    limit = env.unwrapped.max_actions_per_turn
    pieces = _oracle_or_first(env)[:1] * (limit + 2)
    pieces[limit:] = ["extra one", "extra two"]
    *_, info = env.step(format_answer(pieces, "think_answer", think="many"))
    _check_step_info(info)
    assert info["actions"] == tuple(pieces[:limit])
    assert info["dropped_actions"] == ("extra one", "extra two")
    assert len(info["executed_actions"]) <= limit
    env.close()


# Only ids that allow several actions per turn can mix recognised and unrecognised pieces.
MULTI_ACTION_IDS = [
    env_id
    for env_id, entry in agentgym.registered_envs().items()
    if entry.default_kwargs.get("max_actions_per_turn", 1) > 1
]


@pytest.mark.parametrize("env_id", _params(MULTI_ACTION_IDS))
def test_noop_policy_executes_recognised_pieces(env_id: str) -> None:
    """Under noop, unrecognised pieces are skipped and recognised ones execute, with no penalty."""
    env = _make(env_id, invalid_action="noop")
    env.reset(seed=0)
    good = _oracle_or_first(env)[0]
    *_, info = env.step(format_answer([good, "not an action"], "think_answer"))
    assert info["action_is_valid"] is False
    assert info["format_penalty"] == 0.0
    assert len(info["executed_actions"]) == 1
    env.close()


@pytest.mark.parametrize("env_id", _params())
def test_random_unicode_never_raises(env_id: str) -> None:
    env = _make(env_id)
    strings = st.text(max_size=200)
    tagged = st.builds(
        lambda think, answer: f"<think>{think}</think><answer>{answer}</answer>", strings, strings
    )

    @settings(
        max_examples=40,
        derandomize=True,
        database=None,
    )
    @given(text=st.one_of(strings, tagged))
    def check(text: str) -> None:
        obs0, info0 = env.reset(seed=0)
        step = env.step(text)
        _check_step_info(step[4])
        assert isinstance(step[1], float)
        if not step[4]["action_is_valid"]:
            _assert_rejected(env, obs0, info0, step, "penalize", penalty=-0.1)

    check()
    env.close()


# ----------------------------------------------------------------------------- episode plumbing


@pytest.mark.parametrize("env_id", _params())
def test_oracle_episode_info_render_and_close(env_id: str) -> None:
    """Play the oracle to the end: every info has its keys; render() is the observation."""
    env = _make(env_id, render_mode="ansi")
    obs, info = env.reset(seed=0)
    _check_reset_info(info)
    assert env.render() == obs
    assert env.observation_space.contains(obs)
    for _ in range(500):
        obs, reward, terminated, truncated, info = env.step(policy_answer(env)[1])
        _check_step_info(info)
        assert isinstance(reward, float)
        assert env.render() == obs
        if terminated or truncated:
            break
    else:
        pytest.fail("the episode never ended")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(policy_answer(env)[1])
    env.close()
    env.close()  # twice is fine


@pytest.mark.parametrize("env_id", _params())
def test_terminate_policy_ends_episode(env_id: str) -> None:
    env = _make(env_id, invalid_action="terminate", max_turns=5)
    obs0, info0 = env.reset(seed=1)
    step = env.step("<think>x</think><answer>definitely not an action</answer>")
    assert step[2] is True and step[3] is False
    _assert_rejected(env, obs0, info0, step, "terminate", penalty=-0.1)
    env.close()


@pytest.mark.parametrize("env_id", _params())
def test_penalized_turn_counts_against_max_turns(env_id: str) -> None:
    """max_turns invalid turns end the episode (terminated if the budget is a rule, else truncated)."""
    env = _make(env_id, max_turns=2)
    env.reset(seed=0)
    first = env.step("bad")
    assert first[2:4] == (False, False) and first[4]["turn"] == 1
    last = env.step("bad")
    assert last[4]["turn"] == 2
    limit_terminates = env.unwrapped.turn_limit_terminates
    assert last[2:4] == (limit_terminates, not limit_terminates)
    env.close()


# ----------------------------------------------------------------------------- registration


@pytest.mark.parametrize("env_id", _params())
def test_fixed_task_kwargs_cannot_be_overridden(env_id: str) -> None:
    entry = agentgym.registered_envs()[env_id]
    for key, fixed in entry.task_kwargs.items():
        with pytest.raises(ValueError, match=env_id):
            _make(env_id, **{key: "__another value__"})
        _make(env_id, **{key: fixed}).close()  # passing the fixed value itself is allowed


@pytest.mark.parametrize("env_id", _params())
def test_default_kwargs_can_be_overridden(env_id: str) -> None:
    entry = agentgym.registered_envs()[env_id]
    env = _make(env_id)
    for key, default in entry.default_kwargs.items():
        assert getattr(env.unwrapped, key) == default, key
    env.close()
    if "max_turns" in entry.default_kwargs:
        env = _make(env_id, max_turns=7)
        assert env.unwrapped.max_turns == 7
        env.close()


@pytest.mark.parametrize("env_id", _params())
def test_max_episode_steps_is_refused_naming_max_turns(env_id: str) -> None:
    """Gymnasium's ``max_episode_steps`` (a TimeLimit) used to be applied on top of the env's
    own budget: ``make("agentgym/Sokoban-v0", max_episode_steps=2)`` truncated after 2 steps
    while ``info["actions_left"]`` said 8 and ``info["max_turns"]`` 5. Every id refuses it now,
    naming ``max_turns=``; ``-1`` (Gymnasium's "no limit") passes and adds no wrapper."""
    with pytest.raises(EnvKwargsError) as err:
        _make(env_id, max_episode_steps=2)
    assert err.value.key == "max_episode_steps"
    assert f"{env_id} does not take gymnasium.make(..., max_episode_steps=2)" in str(err.value)
    assert "pass max_turns=2 instead" in str(err.value)
    spec = copy.deepcopy(gymnasium.spec(env_id))
    spec.max_episode_steps = 4  # a limit in the spec is a TimeLimit too
    with pytest.raises(EnvKwargsError, match="pass max_turns=4 instead"):
        gymnasium.make(spec)
    env = _make(env_id, max_episode_steps=-1)
    try:
        chain = [type(env).__name__, type(env.env).__name__, type(env.env.env).__name__]
        assert chain[:2] == ["OrderEnforcing", "PassiveEnvChecker"]  # as without the guard
        assert env.env.env is env.unwrapped
    finally:
        env.close()


def test_fixed_kwarg_error_message_for_bandit() -> None:
    with pytest.raises(ValueError) as err:
        gymnasium.make("agentgym/Bandit-v0", name_split="heldout")
    assert str(err.value) == (
        "name_split='train' is fixed by agentgym/Bandit-v0; "
        "use agentgym/BanditHeldOut-v0 for name_split='heldout'"
    )
    # A value no id fixes points to the id that leaves the argument free.
    with pytest.raises(ValueError) as err:
        gymnasium.make("agentgym/SokobanHard-v0", num_boxes=3)
    assert str(err.value) == (
        "num_boxes=2 is fixed by agentgym/SokobanHard-v0; "
        "pass num_boxes=3 to agentgym/Sokoban-v0, which leaves it free"
    )


def test_every_id_is_in_the_namespace_with_a_summary() -> None:
    for env_id, entry in agentgym.registered_envs().items():
        assert env_id.startswith("agentgym/") and "-v" in env_id
        assert env_id in gymnasium.registry
        assert entry.summary and "\n" not in entry.summary


def _run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_make_with_module_prefix_in_fresh_process() -> None:
    """``gymnasium.make("agentgym:agentgym/Bandit-v0")`` imports agentgym by itself."""
    out = _run_python(
        "import sys, gymnasium\n"
        "assert 'agentgym' not in sys.modules\n"
        "env = gymnasium.make('agentgym:agentgym/Bandit-v0')\n"
        "obs, info = env.reset(seed=0)\n"
        "print(type(env.unwrapped).__name__, repr(obs))\n"
    )
    assert out == "BanditEnv 'Arm 1: Nurse\\nArm 2: Stuntman'"


def _json_like(value: Any) -> Any:
    """Tuples as lists: what a value is after a trip through JSON."""
    if isinstance(value, (list, tuple)):
        return [_json_like(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_like(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("env_id", _params())
def test_spec_round_trips_through_json(env_id: str) -> None:
    """``gymnasium.spec(id).to_json()`` raised for every id (a callable entry point); now the
    entry point is a ``module:attribute`` string, the spec round trips as Gymnasium's own do,
    and ``gymnasium.make`` of the round-tripped spec builds the same env."""
    spec = gymnasium.spec(env_id)
    assert spec.entry_point == "agentgym.registration:" + maker_name(env_id)
    text = spec.to_json()
    restored = EnvSpec.from_json(text)
    assert restored.to_json() == text
    assert (restored.id, restored.entry_point) == (spec.id, spec.entry_point)
    assert restored.kwargs == _json_like(spec.kwargs)  # JSON has no tuples (Sokoban's dim_room)
    env, again = _make(env_id), gymnasium.make(restored)
    try:
        assert type(again.unwrapped) is type(env.unwrapped)
        assert again.reset(seed=0) == env.reset(seed=0)
    finally:
        env.close()
        again.close()


def test_maker_names_by_hand() -> None:
    assert maker_name("agentgym/SokobanHard-v0") == "make_SokobanHard_v0"
    assert maker_name("agentgym/CodeExecGenerated-v0") == "make_CodeExecGenerated_v0"
    assert len({maker_name(env_id) for env_id in ENV_IDS}) == len(ENV_IDS)
    with pytest.raises(AttributeError, match="no attribute 'make_Nothing_v0'"):
        agentgym.registration.make_Nothing_v0  # noqa: B018


def test_a_json_spec_makes_its_env_in_a_fresh_process() -> None:
    """The JSON names its entry point by module: a process that has imported only Gymnasium
    builds the env from it (the module's import registers agentgym's ids)."""
    text = gymnasium.spec("agentgym/SokobanHard-v0").to_json()
    out = _run_python(
        "import sys, gymnasium\n"
        "from gymnasium.envs.registration import EnvSpec\n"
        "assert 'agentgym' not in sys.modules\n"
        f"env = gymnasium.make(EnvSpec.from_json({text!r}))\n"
        "print(type(env.unwrapped).__name__, env.unwrapped.dim_room, env.unwrapped.num_boxes)\n"
    )
    assert out == "SokobanEnv (8, 8) 2"  # SokobanHard-v0 fixes an 8x8 room with 2 boxes


def test_import_and_make_do_not_import_torch() -> None:
    code = (
        "import sys, gymnasium, agentgym\n"
        "print('torch' in sys.modules)\n"
        f"for env_id in {AVAILABLE!r}:\n"
        "    env = gymnasium.make(env_id); env.reset(seed=0); env.close()\n"
        "print('torch' in sys.modules)\n"
    )
    assert _run_python(code) == "False\nFalse"
