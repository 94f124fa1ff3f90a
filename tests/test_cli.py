"""The ``agentgym`` command line, run for real in a subprocess (``python -m agentgym.cli``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import agentgym
from agentgym.cli import CLIError, parse_kwargs, resolve_env_id
from tests.helpers import run_python


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_python("-m", "agentgym.cli", *args, stdin=stdin, encoding="utf-8", timeout=120)


def test_python_dash_m_agentgym_is_the_cli() -> None:
    """``python -m agentgym`` runs the same command line as ``python -m agentgym.cli``."""
    args = ["solve", "agentgym/Bandit-v0", "--seed", "0"]
    via_package = run_python("-m", "agentgym", *args, timeout=120)
    assert via_package.returncode == 0, via_package.stderr
    assert via_package.stdout == run_cli(*args).stdout != ""


def test_list_shows_every_id_with_summary_fixed_and_defaults() -> None:
    result = run_cli("list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for env_id, entry in agentgym.registered_envs().items():
        # a nondeterministic id (no leaderboard) says so on its line
        head = f"{env_id}   [nondeterministic]" if entry.nondeterministic else env_id
        at = lines.index(head)
        assert lines[at + 1] == f"    {entry.summary}"
    # Hand-written from agentgym/envs/__init__.py.
    at = lines.index("agentgym/Bandit-v0")
    assert lines[at + 1 : at + 5] == [
        "    Two arms with semantic names, a safe low arm and a risky high arm; one pull.",
        "    fixed:    name_split='train'",
        "    defaults: max_turns=1, max_actions_per_turn=1",
        "    params:   name_set: one of agentgym, ragen; low_arm_reward: float in [-10, 10]; "
        "high_arm_reward: float in [-10, 10]; high_arm_prob: float in [0, 1]; "
        "payout_draws: one of seeded, per_episode",
    ]
    # Every id has a params line; choices are listed; the common parameters are printed once.
    for env_id in agentgym.registered_envs():
        at = next(i for i, line in enumerate(lines) if line.split(" ")[0] == env_id)
        assert lines[at + 4].startswith("    params:   ")
    assert "agentgym/MiniWoBAll-v0   [nondeterministic]" in lines
    at = lines.index("agentgym/Countdown-v0")
    assert "number_rule: one of exact, subset" in lines[at + 4]
    assert lines[-1].startswith("Every id also takes (--kw, unless fixed above): max_turns: int in")
    assert "action_format: one of think_answer, answer, raw" in lines[-1]


def test_solve_bandit_seed_0() -> None:
    result = run_cli("solve", "agentgym/Bandit-v0", "--seed", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "== agentgym/Bandit-v0, seed 0: the oracle plays ==\n"
        "\n-- start --\nArm 1: Nurse\nArm 2: Stuntman\n"
        "\n-- turn 1 --\naction: Stuntman\n"
        "reward: 1   terminated: True   truncated: False   success: True   actions left: 0\n"
        "executed: Stuntman\n"
        "Arm 1: Nurse\nArm 2: Stuntman\nYou pulled Stuntman and received 1.\n"
        "\nEpisode over after 1 turn: return 1, success True\n"
    )


def test_solve_in_the_model_format() -> None:
    result = run_cli("solve", "Bandit-v0", "--seed", "0", "--action-format", "think_answer")
    assert result.returncode == 0, result.stderr
    assert "action: <think>oracle</think><answer>Stuntman</answer>\n" in result.stdout


def test_play_fed_by_stdin() -> None:
    """An invalid turn (a Sokoban move, plus a dropped second action), then the risky arm."""
    result = run_cli(
        "play", "agentgym/Bandit-v0", "--seed", "0", "--kw", "max_turns=2", stdin="Up || Left\n2\n"
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("== agentgym/Bandit-v0, seed 0 ==\n\nYou are playing a bandit game")
    assert "Reply with your action(s) only, e.g. Nurse." in out  # raw format for people
    assert "The episode ends after 2 turns or 2 actions." in out
    assert out.endswith(
        "-- turn 1 --\nArm 1: Nurse\nArm 2: Stuntman\n"
        "action> Up || Left\n"
        "reward: -0.1   terminated: False   truncated: False   success: False   actions left: 2\n"
        "invalid: unrecognised action(s): 'Up'\n"
        "dropped (over 1 per turn): Left\n"
        "\n-- turn 2 --\nArm 1: Nurse\nArm 2: Stuntman\n"
        "action> 2\n"
        "reward: 1   terminated: True   truncated: False   success: True   actions left: 1\n"
        "executed: Stuntman\n"
        "\nArm 1: Nurse\nArm 2: Stuntman\nYou pulled Stuntman and received 1.\n"
        "\nEpisode over after 2 turns: return 0.9, success True\n"
    )


def test_play_stops_at_end_of_input() -> None:
    result = run_cli("play", "Bandit-v0", "--seed", "0", stdin="")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("action> \n(end of input: episode stopped)\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("play", "Bandt-v0"),
            "agentgym: error: unknown environment id 'Bandt-v0'; did you mean "
            "agentgym/Bandit-v0 or agentgym/Math-v0 or agentgym/BanditHeldOut-v0? "
            "(`agentgym list` shows them all)\n",
        ),
        (
            ("solve", "Chess-v0"),
            "agentgym: error: unknown environment id 'Chess-v0' (`agentgym list` shows them all)\n",
        ),
        (
            ("play", "Bandit-v0", "--kw", "max_turns"),
            "agentgym: error: --kw expects key=value, got 'max_turns'\n",
        ),
        (
            ("play", "Bandit-v0", "--kw", "foo=1"),
            "agentgym: error: agentgym/Bandit-v0 takes no argument 'foo' (bad --kw)\n",
        ),
        (
            ("play", "Bandit-v0", "--kw", "max_turns=0"),
            "agentgym: error: bad --kw for agentgym/Bandit-v0: max_turns must be an int >= 1, "
            "got 0\n",
        ),
        (
            ("solve", "Bandit-v0", "--kw", "name_split=heldout"),
            "agentgym: error: bad --kw for agentgym/Bandit-v0: name_split='train' is fixed by "
            "agentgym/Bandit-v0; use agentgym/BanditHeldOut-v0 for name_split='heldout'\n",
        ),
    ],
)
def test_user_errors(args: tuple[str, ...], message: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr == message
    assert result.stdout == ""


def test_no_subcommand_is_a_usage_error() -> None:
    result = run_cli()
    assert result.returncode == 2
    assert "usage: agentgym" in result.stderr


# ----------------------------------------------------------------------------- helpers, in process


def test_parse_kwargs_reads_python_literals() -> None:
    assert parse_kwargs(["max_turns=8", "dim_room=(7, 7)", "p=0.5", "flag=True", "name=x y"]) == {
        "max_turns": 8,
        "dim_room": (7, 7),
        "p": 0.5,
        "flag": True,
        "name": "x y",  # not a literal: kept as text
    }
    with pytest.raises(CLIError, match="given twice"):
        parse_kwargs(["a=1", "a=2"])
    with pytest.raises(CLIError, match="must be an argument name"):
        parse_kwargs(["max-turns=1"])


def test_resolve_env_id() -> None:
    assert resolve_env_id("agentgym/Bandit-v0") == "agentgym/Bandit-v0"
    assert resolve_env_id("Bandit-v0") == "agentgym/Bandit-v0"
    with pytest.raises(CLIError, match="did you mean agentgym/Bandit-v0"):
        resolve_env_id("agentgym/Bandit-v1")


def test_list_into_a_closed_pipe_prints_no_traceback():
    # `agentgym list | head -1`: the reader closes the pipe early; the CLI stops quietly.
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # the reader goes away before the CLI (still importing) writes a line
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err
