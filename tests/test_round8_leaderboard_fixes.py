"""The fixes of round 8's leaderboard findings (tests/test_attacks_round8.py): an executed
action is keyed by its canonical form (agentgym/action_keys.py), and a board by task parameters
in their declared kinds with a Math ``task_config``'s reasoning-gym defaults dropped key by key
(agentgym.registration.normalise_task_kwargs); the stored schema is 4."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pytest

import agentgym  # noqa: F401 - registers the ids
from agentgym.action_keys import INVALID_CODE, answer_key, code_key, expression_key
from agentgym.agents import Agent, AgentError, AgentRequest
from agentgym.envs import reasoning_gym_defaults
from agentgym.envs.code_exec import MAX_ANSWER_CHARS
from agentgym.registration import normalise_task_kwargs, registered_envs
from agentgym.solvers.countdown_expr import canonical_expression, parse_expression
from leaderboards import store as store_module
from leaderboards.__main__ import main
from leaderboards.verify import actions_digest, board_key, executed_record
from tests.helpers import quiet_eval

# ----------------------------------------------------------------------------- action keys


def test_countdown_expressions_have_one_spelling() -> None:
    assert canonical_expression("52 - (86 + 27 - 64)") == "52-(86+27-64)"
    assert canonical_expression(" 52  -   ( 86  +  27  -  64 ) = 3") == "52-(86+27-64)"
    assert canonical_expression("((007)) * --(2 + 3)") == "7*(2+3)"
    assert canonical_expression("2 - (-3)") == canonical_expression("2--3") == "2--3"
    assert canonical_expression("(1 - 2) + 3") == "1-2+3"
    # the tree is kept: another grouping or order of the same numbers is another expression
    assert canonical_expression("1 - (2 + 3)") == "1-(2+3)"
    assert canonical_expression("3 + 2") != canonical_expression("2 + 3")
    assert canonical_expression("9**9") is None and canonical_expression("1" * 201) is None


def test_a_canonical_expression_has_the_same_numbers_and_value() -> None:
    rng = random.Random(8)

    def text(depth: int) -> str:
        r = rng.random()
        if depth > 4 or r < 0.3:
            return str(rng.randint(0, 30)).zfill(rng.choice((1, 1, 2)))
        if r < 0.4:
            return "-" * rng.randint(1, 3) + text(depth + 1)
        if r < 0.55:
            return f"({text(depth + 1)})"
        return f"{text(depth + 1)}{' ' * rng.randint(0, 2)}{rng.choice('+-*/')} {text(depth + 1)}"

    checked = 0
    for _ in range(3000):
        original = text(0)
        parsed = parse_expression(original)
        if not parsed.ok:
            continue
        canonical = canonical_expression(original)
        assert canonical is not None and " " not in canonical
        again = parse_expression(canonical)
        assert (again.value, again.numbers) == (parsed.value, parsed.numbers), original
        assert canonical_expression(canonical) == canonical
        checked += 1
    assert checked > 2000


def test_code_keys_are_the_code_that_runs() -> None:
    plain = "def f(x):\n    return x + 1\n"
    same = [
        plain,
        f"```python\n{plain}```",
        "Here:\n```py\ndef f(x):  # add one\n    return (x+1)\n```\nDone.",
        "def f(x): return x+1",
    ]
    assert len({code_key(a) for a in same}) == 1
    assert code_key(plain).startswith("py:")
    other = [
        "def f(x):\n    return x + 2\n",
        "def f(y):\n    return y + 1\n",
        'def f(x):\n    """Adds one."""\n    return x + 1\n',  # a docstring is code: __doc__
        "def f(x):\n    return x + 1.0\n",
        "def f(x):\n    return x + True\n",
    ]
    assert len({code_key(a) for a in [plain, *other]}) == 1 + len(other)
    assert code_key("def f(:") == INVALID_CODE
    assert code_key("x = 1\n" + "#" * MAX_ANSWER_CHARS) == INVALID_CODE  # over the cap: unparsed
    # never raises: a literal too long for a decimal repr, and the deepest nesting that parses
    assert code_key("x = 0x" + "f" * 60_000).startswith("py:")
    deep = "x = " + "(" * 190 + "1" + ")" * 190
    assert code_key(deep) == code_key("x = 1")


def test_executed_records_use_the_ids_action_keys() -> None:
    countdown = registered_envs()["agentgym/Countdown-v0"]
    assert countdown.action_key is expression_key
    one = {"action_is_valid": True, "executed_actions": ("52 - (86 + 27 - 64)",)}
    two = {"action_is_valid": True, "executed_actions": ("52-( 86+27 - 64 )",)}
    assert executed_record("", one, False, expression_key) == [True, ["52-(86+27-64)"]]
    assert executed_record("", one, False, expression_key) == executed_record(
        "", two, False, expression_key
    )
    # Math: white space only (the env does not report the value it read)
    assert registered_envs()["agentgym/MathArithmetic-v0"].action_key is answer_key
    assert answer_key(" 1 /\n2 ") == "1 / 2" and answer_key("18") != answer_key("18.0")
    # CodeExec: the pieces that ran, by their code; a step that ran nothing keys none
    code = registered_envs()["agentgym/CodeExec-v2"]
    assert code.opaque_action_names and code.action_key is code_key
    ran = {"action_is_valid": True, "executed_actions": ("code (20 chars)",)}
    fenced = executed_record("", {**ran, "actions": ("```python\nx = 1\n```",)}, True, code_key)
    bare = executed_record("", {**ran, "actions": ("x = 1  # one",)}, True, code_key)
    assert fenced == bare == [True, 1, [code_key("x = 1")]]
    refused = {"action_is_valid": False, "executed_actions": (), "actions": ("x = (",)}
    assert executed_record("", refused, True, code_key) == [False, 0, []]
    assert actions_digest([fenced]) != actions_digest([refused])


# ----------------------------------------------------------------------------- board keys


def test_float_parameters_are_keyed_as_floats() -> None:
    assert normalise_task_kwargs("agentgym/FrozenLake-v0", {"p": 1}) == {"p": 1.0}
    assert isinstance(normalise_task_kwargs("agentgym/FrozenLake-v0", {"p": 1})["p"], float)
    assert board_key(
        "agentgym/FrozenLake-v0", normalise_task_kwargs("agentgym/FrozenLake-v0", {"p": 1})
    ) == board_key(
        "agentgym/FrozenLake-v0", normalise_task_kwargs("agentgym/FrozenLake-v0", {"p": 1.0})
    )
    zero = normalise_task_kwargs("agentgym/Countdown-v0", {"format_score": -0.0})
    assert zero == {"format_score": 0.0} and str(zero["format_score"]) == "0.0"
    assert normalise_task_kwargs("agentgym/Bandit-v0", {"high_arm_prob": 1}) == {
        "high_arm_prob": 1.0
    }
    # an int stays an int; a bool is never a number
    kept = normalise_task_kwargs("agentgym/Sokoban-v0", {"max_turns": 7})
    assert kept == {"max_turns": 7} and type(kept["max_turns"]) is int
    with pytest.raises(ValueError):
        normalise_task_kwargs("agentgym/FrozenLake-v0", {"p": True})


def test_a_task_config_drops_reasoning_gyms_defaults_key_by_key() -> None:
    from reasoning_gym.arithmetic.basic_arithmetic import BasicArithmeticDatasetConfig

    defaults = BasicArithmeticDatasetConfig()
    assert reasoning_gym_defaults("basic_arithmetic")["max_digits"] == defaults.max_digits
    arithmetic = "agentgym/MathArithmetic-v0"
    spelt = {"min_terms": defaults.min_terms, "max_digits": defaults.max_digits}
    assert normalise_task_kwargs(arithmetic, {"task_config": spelt}) == {}
    assert normalise_task_kwargs(arithmetic, {"task_config": {}}) == {}
    assert normalise_task_kwargs(arithmetic, {"task_config": None}) == {}
    assert normalise_task_kwargs(
        arithmetic, {"task_config": {"max_terms": 3, "allow_negation": defaults.allow_negation}}
    ) == {"task_config": {"max_terms": 3}}
    # a bool field at its default is dropped; the other bool value is kept
    assert normalise_task_kwargs(
        arithmetic, {"task_config": {"allow_parentheses": not defaults.allow_parentheses}}
    ) == {"task_config": {"allow_parentheses": not defaults.allow_parentheses}}
    # a float field's int spelling is its float (gsm_symbolic's difficulty 1.0 is its default)
    assert normalise_task_kwargs("agentgym/Math-v0", {"task_config": {"difficulty": 1}}) == {}
    assert normalise_task_kwargs(
        "agentgym/MathChainSum-v0", {"task_config": {"min_terms": 2, "max_terms": 9}}
    ) == {"task_config": {"max_terms": 9}}


# ----------------------------------------------------------------------------- stored databases


def test_a_schema_3_database_is_rebuilt_before_it_takes_a_submission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Schema 4 keys actions and boards otherwise: an older database's entries are replayed and
    keyed anew by ``rebuild`` before a submission goes in, and a copy of an entry spelt
    otherwise is then found."""
    assert store_module.SCHEMA_VERSION == 4
    folder = tmp_path / "baselines"
    folder.mkdir()
    quiet_eval("agentgym/FrozenLake-v0", "random", episodes=2, seed=0, out=folder / "random.json")
    entry = tmp_path / "entry.json"
    quiet_eval(
        "agentgym/FrozenLake-v0", "oracle", episodes=2, seed=0, out=entry, env_kwargs={"p": 1}
    )
    db = tmp_path / "lb.sqlite"
    assert main(["submit", str(entry), "--name", "int p", "--db", str(db)]) == 0
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        conn.commit()
    capsys.readouterr()
    other = tmp_path / "other.json"
    quiet_eval("agentgym/FrozenLake-v0", "random", episodes=3, seed=0, out=other)
    assert main(["submit", str(other), "--name", "other", "--db", str(db)]) == 1
    assert "earlier format (schema 3)" in capsys.readouterr().err
    assert main(["rebuild", "--db", str(db), "--from", str(folder)]) == 0
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("4",)
        boards = conn.execute("SELECT DISTINCT env_kwargs FROM results").fetchall()
    assert ('{"p":1.0}',) in boards
    # the same run with p spelt 1.0 is that entry
    again = tmp_path / "again.json"
    quiet_eval(
        "agentgym/FrozenLake-v0", "oracle", episodes=2, seed=0, out=again, env_kwargs={"p": 1.0}
    )
    assert main(["submit", str(again), "--name", "float p", "--db", str(db)]) == 1
    assert "duplicate submission" in capsys.readouterr().err


class _Says(Agent):
    """An agent that gives one fixed answer on every turn."""

    def __init__(self, name: str, text: str) -> None:
        super().__init__()
        self.name, self.text = name, text

    def act(self, requests: Sequence[AgentRequest]) -> list[str | AgentError]:
        return [self.text for _ in requests]


def test_runs_in_which_no_action_ran_are_no_copies_of_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two agents whose every answer is invalid (a random agent's noise, a small model's prose)
    executed nothing, so their replays cannot tell them apart: neither is a copy of the other,
    and both are entries (the committed baselines have such pairs: random and SmolLM2 on
    WebShopText-v0 and on CodeExec). A run that executed actions is still refused as a copy of
    one that executed the same."""
    db = tmp_path / "lb.sqlite"
    bundles = {}
    for name, text in [
        ("noise", "<think>x</think><answer>jump</answer>"),
        ("prose", "I would walk to the goal."),
        ("walker", "<think>x</think><answer>Right</answer>"),
        ("walker copy", "<think>other words</think><answer> Right </answer>"),
    ]:
        bundles[name] = tmp_path / f"{name}.json"
        quiet_eval(
            "agentgym/FrozenLake-v0", _Says(name, text), episodes=2, seed=0, out=bundles[name]
        )
    codes = {}
    for name, path in bundles.items():
        codes[name] = main(["submit", str(path), "--name", name, "--db", str(db)])
    err = capsys.readouterr().err
    assert codes == {"noise": 0, "prose": 0, "walker": 0, "walker copy": 1}, err
    assert "duplicate submission" in err and "'walker'" in err
