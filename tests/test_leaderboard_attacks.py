"""Attacks on the leaderboard (issue 14): bundles that try to choose how they are replayed, to
cost the verifier unbounded work, or to game the ranking, and outputs that try to reach the
terminal or leak files. Each test uses real envs, real replays and a real SQLite file, and
asserts the database byte for byte unchanged and nothing left behind (child processes, temp
files) where the bundle is refused."""

from __future__ import annotations

import copy
import hashlib
import html
import json
import multiprocessing
import re
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentgym.eval import summarize
from agentgym.registration import worst_return
from leaderboards import verify as verify_module
from leaderboards.__main__ import main
from leaderboards.render import html_page, markdown_tables, text_tables
from leaderboards.store import Store
from leaderboards.verify import (
    ReplayBudget,
    SubmissionError,
    VerifierConfig,
    check_consistency,
    replay_run,
    run_within_budget,
    verify_bundle,
)
from tests.helpers import quiet_eval

SOKOBAN = "agentgym/Sokoban-v0"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real bundles on Sokoban-v0: random (8 episodes), oracle (8), oracle with one episode, and
    random and oracle with 20."""
    folder = tmp_path_factory.mktemp("attack-bundles")
    out = {}
    for name, agent, episodes in (("random", "random", 8), ("oracle", "oracle", 8)):
        out[name] = folder / f"{name}.json"
        quiet_eval(SOKOBAN, agent, episodes=episodes, seed=0, out=out[name])
    out["lucky"] = folder / "lucky.json"
    quiet_eval(SOKOBAN, "oracle", episodes=1, seed=0, out=out["lucky"])
    for agent in ("random", "oracle"):
        out[f"{agent}20"] = folder / f"{agent}20.json"
        quiet_eval(SOKOBAN, agent, episodes=20, seed=0, out=out[f"{agent}20"])
    return out


@pytest.fixture()
def db(tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> Path:
    """A leaderboard holding the random entry."""
    path = tmp_path / "lb.sqlite"
    assert main(["submit", str(runs["random"]), "--name", "random", "--db", str(path)]) == 0
    capsys.readouterr()
    return path


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def submit(
    bundle: Any, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    """Write ``bundle`` (a dict or raw text), submit it; return (exit code, stdout, stderr)."""
    path = tmp_path / "attack.json"
    path.write_text(bundle if isinstance(bundle, str) else json.dumps(bundle))
    code = main(["submit", str(path), "--name", "attacker", "--db", str(db), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_refused_cleanly(code: int, out: str, err: str, want_code: int, message: str) -> None:
    assert code == want_code, (code, out, err)
    assert out == ""
    assert err.startswith("refused: ") and err.count("\n") == 1, err  # exactly one line
    assert message in err, err
    assert "Traceback" not in err
    assert multiprocessing.active_children() == []  # no replay process left behind


def assert_refused_untouched(
    bundle: Any,
    db: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    message: str,
    *extra: str,
) -> str:
    """Submit ``bundle``: refused cleanly (exit 1, ``message``), the database byte for byte as it
    was; return the error text."""
    before = sha(db)
    code, out, err = submit(bundle, db, tmp_path, capsys, *extra)
    assert_refused_cleanly(code, out, err, 1, message)
    assert sha(db) == before
    return err


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith((".tmp", "-journal", "-wal"))]


def codeexec_bundle(tmp_path: Path, env_kwargs: dict[str, Any], action: str) -> dict[str, Any]:
    """A CodeExecGenerated-v0 bundle whose one step answers with ``action`` (code that would
    leave a marker file on the host if it ever ran unsandboxed)."""
    out = tmp_path / "codeexec.json"
    bundle = quiet_eval("agentgym/CodeExecGenerated-v0", "random", episodes=1, seed=0, out=out)
    bundle = copy.deepcopy(bundle)
    run = bundle["runs"][0]
    run["env_kwargs"] = env_kwargs
    episode = run["episodes"][0]
    episode["steps"] = episode["steps"][:1]
    episode["steps"][0]["action"] = action
    return bundle


# ----------------------------------------------------------------------------- execution


@pytest.mark.parametrize(
    ("env_kwargs", "setting"),
    [
        ({"sandbox_options": {"allow_unisolated": True}}, "sandbox_options"),  # no sandbox
        ({"backend": "process"}, "backend"),  # the bundle picks the back end
        ({"sandbox_options": {"base_url": "tcp://203.0.113.7:2375"}}, "sandbox_options"),
        ({"timeout_s": 600.0}, "timeout_s"),
    ],
    ids=["unsandboxed", "backend", "foreign-daemon", "timeout"],
)
def test_a_bundle_cannot_choose_how_it_is_replayed(
    env_kwargs: dict[str, Any],
    setting: str,
    tmp_path: Path,
    db: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    marker = tmp_path / "ran-on-the-host"
    code = f"<answer>open({str(marker)!r}, 'w').write('pwned')</answer>"
    bundle = codeexec_bundle(tmp_path, env_kwargs, code)
    before = sha(db)
    code_, out, err = submit(bundle, db, tmp_path, capsys)
    assert_refused_cleanly(code_, out, err, 1, f"{setting} is an execution setting")
    assert "the verifier replays with its own configuration" in err
    assert not marker.exists()  # refused before anything was built or run
    assert sha(db) == before and not leftovers(tmp_path)


def test_execution_settings_of_a_real_eval_are_recorded_apart_and_not_replayed(
    tmp_path: Path,
) -> None:
    """`agentgym eval --kw backend=process` plays with the user's setting; the bundle keeps it
    apart (env_settings, documentation) and the verifier replays with its own."""
    bundle = quiet_eval(
        "agentgym/CodeExecGenerated-v0",
        "random",
        episodes=1,
        seed=0,
        out=tmp_path / "run.json",
        env_kwargs={"backend": "process", "feedback_chars": 1500},
    )
    run = bundle["runs"][0]
    assert run["env_kwargs"] == {"feedback_chars": 1500}
    assert run["env_settings"] == {"backend": "process"}
    verified = verify_bundle(bundle)
    assert verified.runs[0].env_kwargs == {}  # feedback_chars=1500 is the default


# ----------------------------------------------------------------------------- budget


def test_an_oversized_task_is_refused_by_the_gate(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A catalog of 10^9 products would take days to build: refused by the bound the registry
    states, before anything is built."""
    bundle = load(runs["random"])
    bundle["runs"][0]["env_id"] = "agentgym/WebShopText-v0"
    bundle["runs"][0]["env_kwargs"] = {"num_products": 10**9}
    assert_refused_untouched(bundle, db, tmp_path, capsys, "num_products must be an int <= 5000")


def test_a_replay_over_the_step_budget_is_refused_before_it_starts(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = load(runs["oracle"])
    steps = sum(len(e["steps"]) + 1 for e in bundle["runs"][0]["episodes"])
    message = "over the replay budget (limit: steps)"
    err = assert_refused_untouched(
        bundle, db, tmp_path, capsys, message, "--replay-steps", str(steps - 1)
    )
    assert f"needs {steps} env steps and resets, the verifier allows {steps - 1}" in err
    # At exactly the budget it is accepted.
    code, out, err = submit(bundle, db, tmp_path, capsys, "--replay-steps", str(steps))
    assert code == 0, err


def _sleep_forever() -> None:
    time.sleep(3600)


def _hold_memory() -> None:
    block = b"x" * (400 * 2**20)  # 400 MiB, written, so resident
    time.sleep(3600)
    del block


@pytest.mark.parametrize(
    ("fn", "budget", "limit"),
    [
        (_sleep_forever, ReplayBudget(max_seconds=0.5), "limit: time: 0.5 s of wall time"),
        (_hold_memory, ReplayBudget(max_memory_mb=128), "limit: memory: 128 MiB resident"),
    ],
    ids=["time", "memory"],
)
def test_a_replay_over_its_time_or_memory_budget_is_stopped(
    fn: Any, budget: ReplayBudget, limit: str
) -> None:
    """The replay process (and its process group) is stopped and the refusal names the limit."""
    with pytest.raises(SubmissionError) as err:
        run_within_budget(fn, budget)
    assert limit in str(err.value) and "nothing was stored" in str(err.value)
    assert multiprocessing.active_children() == []


def test_the_budget_passes_results_and_refusals_through() -> None:
    assert run_within_budget(lambda: {"ok": [1, 2]}, ReplayBudget()) == {"ok": [1, 2]}

    def refuse() -> None:
        raise SubmissionError("replay mismatch (test)")

    with pytest.raises(SubmissionError, match=r"^replay mismatch \(test\)$"):
        run_within_budget(refuse, ReplayBudget())


def test_the_replay_stops_at_the_first_wrong_step(
    runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: an episode was replayed to its end before its steps were compared. Now each step
    is compared as it is replayed: a bundle whose first step is wrong costs one env step."""
    run = load(runs["random"])["runs"][0]
    episode = run["episodes"][0]
    assert len(episode["steps"]) == 5  # random never solves it: 5 turns
    episode["steps"][0]["reward"] += 1.0
    stepped: list[str] = []
    real = verify_module.make_env

    def counting(env_id: str, kwargs: dict[str, Any]) -> Any:
        env = real(env_id, kwargs)
        step = env.step

        def counted(action: str) -> Any:
            stepped.append(action)
            return step(action)

        env.step = counted
        return env

    monkeypatch.setattr(verify_module, "make_env", counting)
    with pytest.raises(
        SubmissionError, match=r"episode 0 \(seed 0\), step 0: the bundle says reward"
    ):
        replay_run(run)
    assert stepped == [episode["steps"][0]["action"]]


def test_a_slow_reset_is_refused_at_the_per_step_limit(
    runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25: one slow reset (a task that takes minutes to generate) held the verifier for the
    whole replay budget. Building the env, each reset and each step now has a limit of its own
    (``max_step_seconds``), enforced in the replay's process. The reset here sleeps 30 s; the
    limit is 0.5 s."""
    real = verify_module.make_env

    def slow(env_id: str, kwargs: dict[str, Any]) -> Any:
        env = real(env_id, kwargs)
        reset = env.reset

        def slow_reset(**kw: Any) -> Any:
            time.sleep(30)
            return reset(**kw)

        env.reset = slow_reset
        return env

    monkeypatch.setattr(verify_module, "make_env", slow)
    config = VerifierConfig(budget=ReplayBudget(max_step_seconds=0.5))
    with pytest.raises(SubmissionError) as err:
        verify_bundle(load(runs["oracle"]), config)
    assert str(err.value) == (
        "over the replay budget (limit: step: 0.5 s for building the env, one reset or one "
        "step): the reset of agentgym/Sokoban-v0, episode 0 (seed 0) took longer; the replay "
        "was stopped and nothing was stored"
    )
    assert multiprocessing.active_children() == []
    with pytest.raises(ValueError, match="max_step_seconds must be a number > 0"):
        ReplayBudget(max_step_seconds=0)


def test_a_reasoning_gym_config_is_bounded_before_anything_is_built(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: `task_config={"max_digits": 1000000}` passed the gate (a mapping of scalars)
    and one reset then took more than 15 minutes. A bundle's task_config is now held to the
    bounds stated per task (agentgym.envs.MATH_TASK_CONFIG_BOUNDS), before anything is built."""
    bundle = quiet_eval("agentgym/MathChainSum-v0", "random", episodes=1, out=tmp_path / "m.json")
    run = bundle["runs"][0]
    cases = [
        (
            "agentgym/MathChainSum-v0",
            {"max_digits": 10**6},
            "task_config['max_digits'] must be an int <= 20",
        ),
        (
            "agentgym/MathArithmetic-v0",
            {"max_terms": 7},
            "task_config['max_terms'] must be an int <= 6",
        ),
        (
            "agentgym/MathArithmetic-v0",
            {"operators": "*"},
            "'operators' is not a field of basic_arithmetic a result bundle may set",
        ),
        (
            "agentgym/Math-v0",
            {"difficulty": 2.0},
            "task_config['difficulty'] must be a number <= 1",
        ),
    ]
    for env_id, config, message in cases:
        run["env_id"], run["env_kwargs"] = env_id, {"task_config": config}
        with pytest.raises(SubmissionError, match=re.escape(message)):
            check_consistency(bundle)
    # Another reasoning-gym task runs with its defaults only.
    run["env_id"], run["env_kwargs"] = "agentgym/Math-v0", {"task": "products"}
    check_consistency(bundle)
    run["env_kwargs"] = {"task": "products", "task_config": {"min_terms": 2}}
    with pytest.raises(SubmissionError, match="may configure only the tasks basic_arithmetic"):
        check_consistency(bundle)
    # Within the bounds: accepted by the gate.
    run["env_id"], run["env_kwargs"] = (
        "agentgym/MathChainSum-v0",
        {"task_config": {"max_digits": 20}},
    )
    check_consistency(bundle)
    # Submitted, the refusal is one clean line and nothing is built or stored.
    run["env_kwargs"] = {"task_config": {"max_digits": 10**6}}
    message = "env_kwargs refused: task_config['max_digits']"
    assert_refused_untouched(bundle, db, tmp_path, capsys, message)


# ----------------------------------------------------------------------------- ranking


def _errored(bundle: dict[str, Any], error_return: float | None, played: int) -> dict[str, Any]:
    """Every episode but the first ``played`` errored before its first step (record return 0,
    which beats random's -0.5), summarised with ``error_return`` as
    :func:`agentgym.bundle.summarize` takes it."""
    bundle = copy.deepcopy(bundle)
    run = bundle["runs"][0]
    for episode in run["episodes"][played:]:
        episode.update(steps=[], turns=0, error="agent raised", success=False, terminated=False)
        episode.update(truncated=False, **{"return": 0.0})
    run["summary"] = summarize(run["episodes"], error_return)
    bundle["agent"]["name"] = "errors"
    return bundle


def test_errored_episodes_score_the_envs_worst_return(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # By hand: 5 turns x format penalty -0.1, 10 actions x -0.1, 1 box pushed off -1 = -2.5.
    assert worst_return(SOKOBAN) == pytest.approx(-2.5)
    first = load(runs["random"])["runs"][0]["episodes"][0]["return"]  # played, kept
    # A summary that counts the errors at their recorded 0.0 is refused: it is not what eval writes.
    claimed = _errored(load(runs["random"]), None, played=1)
    assert claimed["runs"][0]["summary"]["mean_return"] == pytest.approx(first / 8)
    code, _, err = submit(claimed, db, tmp_path, capsys)
    assert code == 1
    mean = (first + 7 * -2.5) / 8
    assert f"summary mean_return is {first / 8!r} but the episodes give {mean!r}" in err
    # The summary eval writes (errors at the worst return) is stored, and ranks below playing.
    bundle = _errored(load(runs["random"]), worst_return(SOKOBAN), played=1)
    assert bundle["runs"][0]["summary"]["mean_return"] == pytest.approx(mean)
    code, out, err = submit(bundle, db, tmp_path, capsys)
    assert code == 0, err
    (board,) = Store(db).entries(SOKOBAN).values()
    assert [e.name for e in board] == ["random", "attacker"]  # errors rank last
    assert board[1].mean_return == pytest.approx(mean) and board[1].errors == 7
    assert board[0].mean_return > mean


def test_a_run_whose_every_episode_errored_is_refused(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: a bundle whose every episode errored (the agent never played) was accepted as
    an entry. A run with no episode played is refused, before any replay, naming the fix."""
    bundle = _errored(load(runs["random"]), worst_return(SOKOBAN), played=0)
    message = (
        "runs/0 (agentgym/Sokoban-v0): every one of its 8 episodes ended in an error, so no "
        "episode was played to score"
    )
    assert_refused_untouched(bundle, db, tmp_path, capsys, message)


def test_stored_return_is_the_replays_not_the_bundles_claim(
    tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The consistency check allows 1e-6 between a return and its rewards; what is stored is
    the replayed sum, so the slack cannot be harvested."""
    bundle = load(runs["oracle"])
    run = bundle["runs"][0]
    for episode in run["episodes"]:
        episode["return"] += 9e-7
    run["summary"] = summarize(run["episodes"])
    db = tmp_path / "lb.sqlite"
    assert submit(bundle, db, tmp_path, capsys)[0] == 0
    (board,) = Store(db).entries().values()
    replayed = [
        sum(s["reward"] for s in e["steps"]) for e in load(runs["oracle"])["runs"][0]["episodes"]
    ]
    assert board[0].mean_return == pytest.approx(sum(replayed) / 8, abs=1e-12)


def test_one_lucky_episode_is_listed_but_not_ranked(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = submit(load(runs["lucky"]), db, tmp_path, capsys)
    assert code == 0, err
    (board,) = Store(db).entries(SOKOBAN).values()
    assert [(e.name, e.ranked, e.episodes) for e in board] == [
        ("random", True, 8),
        ("attacker", False, 1),  # 100% success on 1 episode, below the 8 a rank needs
    ]
    text = text_tables(Store(db).entries(SOKOBAN)).splitlines()
    assert text[2].split()[:2] == ["1", "random"]
    assert text[3].split()[:2] == ["-", "attacker"]
    assert text[4] == "(ranked entries need at least 8 episodes; '-': fewer, listed unranked)"


def window(bundle: dict[str, Any], start: int, count: int) -> dict[str, Any]:
    """The episodes on seeds ``start .. start + count - 1`` of ``bundle``'s first run, as a
    bundle of their own (seeds and summary made to agree): a window of one run."""
    bundle = copy.deepcopy(bundle)
    run = bundle["runs"][0]
    first = run["seed"]
    run["episodes"] = run["episodes"][start - first : start - first + count]
    run["seed"], run["seeds"] = start, list(range(start, start + count))
    run["summary"] = summarize(run["episodes"], worst_return(run["env_id"]))
    return bundle


def test_the_verifier_chooses_the_seeds_not_the_submitter(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: a run's first seed was the submitter's, so a random agent (about 50% on
    Bandit-v0) could submit the luckiest 8 consecutive seeds of a long run and rank first. Now a
    run covers the official seeds' first n (0, 1, ...): any other window is refused."""
    out = tmp_path / "bandit.json"
    bundle = quiet_eval("agentgym/Bandit-v0", "random", episodes=40, seed=0, out=out)
    wins = [e["success"] for e in bundle["runs"][0]["episodes"]]
    luckiest = max(range(1, 33), key=lambda k: sum(wins[k : k + 8]))  # any window but seed 0's
    before = sha(db)
    code, out_, err = submit(window(bundle, luckiest, 8), db, tmp_path, capsys)
    assert_refused_cleanly(
        code, out_, err, 1, f"the run starts at seed {luckiest}, but a leaderboard's official seeds"
    )
    assert "rerun agentgym eval with --seed 0" in err
    assert sha(db) == before
    # The official window of the same run, seeds 0-7, is accepted.
    code, _, err = submit(window(bundle, 0, 8), db, tmp_path, capsys)
    assert code == 0, err


def test_overlapping_windows_of_one_run_are_one_entry(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: two windows of one run (different bundles, so different digests) were two
    entries. Now a run whose episodes on every seed it shares with a stored entry are that
    entry's, action for action, is a duplicate: a shorter prefix and a longer run alike."""
    before = sha(db)
    shorter = window(load(runs["random"]), 0, 4)
    code, out, err = submit(shorter, db, tmp_path, capsys)
    message = "duplicate submission: its agentgym/Sokoban-v0 episodes on seeds 0-3 are those of "
    assert_refused_cleanly(code, out, err, 1, message + "entry #1 ('random'), action for action")
    # The same agent's 20-episode run starts with the stored run's 8 episodes.
    code, out, err = submit(load(runs["random20"]), db, tmp_path, capsys)
    assert_refused_cleanly(code, out, err, 1, "episodes on seeds 0-7 are those of entry #1")
    assert sha(db) == before
    # Another agent seed plays other episodes: a second entry.
    other = tmp_path / "other.json"
    quiet_eval(SOKOBAN, "random", episodes=8, agent_seed=7, out=other)
    code, _, err = submit(load(other), db, tmp_path, capsys)
    assert code == 0, err


def test_entries_rank_by_the_wilson_lower_bound(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: ranking by the success rate put 8 of 8 (100%) above 18 of 20 (90%), though 8
    episodes say less. Entries now rank by the lower bound of the 95% Wilson interval. By hand
    (z = 1.96): 8/8 gives centre 0.8378, half-width 0.1622, low 0.6756; 18/20 gives centre
    0.8356, half-width 0.1366, low 0.6990."""
    assert main(["submit", str(runs["oracle"]), "--name", "oracle 8", "--db", str(db)]) == 0
    # 18 of 20: the oracle's run with random's (failed) episodes on seeds 3 and 5, a run any
    # agent could have played (it replays).
    mixed = load(runs["oracle20"])
    random20 = load(runs["random20"])["runs"][0]["episodes"]
    episodes = mixed["runs"][0]["episodes"]
    for seed in (3, 5):
        assert not random20[seed]["success"]
        episodes[seed] = random20[seed]
    mixed["runs"][0]["summary"] = summarize(episodes, worst_return(SOKOBAN))
    code, _, err = submit(mixed, db, tmp_path, capsys)
    assert code == 0, err
    (board,) = Store(db).entries(SOKOBAN).values()
    assert [(e.name, e.successes, e.episodes) for e in board] == [
        ("attacker", 18, 20),
        ("oracle 8", 8, 8),
        ("random", 0, 8),
    ]
    assert board[0].ci_low == pytest.approx(0.6990, abs=5e-5)
    assert board[1].ci_low == pytest.approx(0.6756, abs=5e-5)


def test_a_kwarg_equal_to_its_default_is_the_default_board(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`max_turns=5` and `dim_room=(6, 6)` are Sokoban-v0's defaults: the same board, and the
    same episodes as a stored entry are a duplicate, however the defaults are spelled."""
    out = tmp_path / "spelled.json"
    quiet_eval(
        SOKOBAN,
        "random",
        episodes=8,
        seed=0,
        out=out,
        env_kwargs={"max_turns": 5, "dim_room": (6, 6), "format_penalty": -0.1},
    )
    before = sha(db)
    code, _, err = submit(load(out), db, tmp_path, capsys)
    assert_refused_cleanly(code, "", err, 1, "duplicate submission")
    assert sha(db) == before
    other = tmp_path / "other.json"
    quiet_eval(SOKOBAN, "random", episodes=8, agent_seed=3, out=other, env_kwargs={"max_turns": 5})
    assert submit(load(other), db, tmp_path, capsys)[0] == 0
    assert list(Store(db).entries()) == [(SOKOBAN, "{}")]  # one board, two entries


def test_a_limit_that_changes_no_episode_opens_no_board(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: `max_action_length=20000` (the action space's size: a longer action is handled
    like any other text) opened a board of its own, where its submitter was alone. The space
    sizes now key no board: the same run is a duplicate of the stored one, another run joins
    the `{}` board, and the replay still builds the env with the bundle's limits."""
    limits = {"max_action_length": 20000, "max_observation_length": 10000}
    same = tmp_path / "same.json"
    quiet_eval(SOKOBAN, "random", episodes=8, out=same, env_kwargs=limits)
    assert_refused_untouched(load(same), db, tmp_path, capsys, "are those of entry #1 ('random')")
    other = tmp_path / "other.json"
    bundle = quiet_eval(SOKOBAN, "random", episodes=8, agent_seed=3, out=other, env_kwargs=limits)
    assert bundle["runs"][0]["env_kwargs"] == limits
    assert verify_bundle(bundle).runs[0].env_kwargs == limits  # replayed with them
    assert submit(bundle, db, tmp_path, capsys)[0] == 0
    assert [(k, len(v)) for k, v in Store(db).entries().items()] == [((SOKOBAN, "{}"), 2)]
    # A parameter that does change the episodes still has its own board.
    turns = tmp_path / "turns.json"
    quiet_eval(SOKOBAN, "random", episodes=8, out=turns, env_kwargs={"max_turns": 3})
    assert submit(load(turns), db, tmp_path, capsys)[0] == 0
    assert list(Store(db).entries()) == [(SOKOBAN, "{}"), (SOKOBAN, '{"max_turns":3}')]


# ----------------------------------------------------------------------------- output


def test_names_are_printed_inert(
    tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's name (the bundle's, self-reported) may hold anything: it is printed inert.
    An entry name with control characters is refused (below, and issue 25)."""
    db = tmp_path / "lb.sqlite"
    bundle = load(runs["oracle"])
    bundle["agent"]["name"] = "agent\x1b]0;owned\x07\u200b\u202e"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(bundle))
    evil = "\x1b[2J\x1b[31mwin\rner\u202e"
    assert main(["submit", str(path), "--name", evil, "--db", str(db)]) == 2
    assert "--name holds U+001B, a control or invisible character" in capsys.readouterr().err
    assert main(["submit", str(path), "--name", "mine", "--db", str(db)]) == 0
    accepted = capsys.readouterr().out
    assert main(["show", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    boards = Store(db).entries()
    for text in (accepted, shown, markdown_tables(boards), html_page(boards)):
        assert not any(ch in text for ch in "\x1b\x07\r\u202e\u200b"), repr(text)
    assert "agent\\x1b]0;owned\\x07\\u200b\\u202e" in shown


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("oracle\u200b", "U+200B ZERO WIDTH SPACE"),  # looks like "oracle"
        ("\u202eelcaro", "U+202E RIGHT-TO-LEFT OVERRIDE"),  # displays as "oracle"
        ("ora\u00adcle", "U+00AD SOFT HYPHEN"),
        ("orac\u200dle", "U+200D ZERO WIDTH JOINER"),
        ("or\u0430cle", "mixes letters of look-alike scripts (CYRILLIC, LATIN)"),  # Cyrillic a
        ("\u03bfracle", "mixes letters of look-alike scripts (GREEK, LATIN)"),  # Greek omicron
        ("line\u2028break", "U+2028 LINE SEPARATOR"),
    ],
    ids=["zero-width", "bidi", "soft-hyphen", "joiner", "cyrillic", "greek", "separator"],
)
def test_a_name_that_would_pass_for_another_is_refused(
    name: str,
    problem: str,
    tmp_path: Path,
    runs: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 25: a name with a zero-width, bidi or look-alike character was stored and shown as
    another's name. Such names are refused (usage error, nothing created)."""
    db = tmp_path / "lb.sqlite"
    assert main(["submit", str(runs["oracle"]), "--name", name, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("leaderboards submit: --name ") and problem in err, err
    assert err.count("\n") == 1 and not db.exists()


def test_names_are_stored_nfkc_normalised(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Full-width letters and ligatures are their plain forms (NFKC): "ｏｒａｃｌｅ" is stored as
    "oracle"; letters of one script, accents and non-look-alike scripts are names like any."""
    assert main(["submit", str(runs["oracle"]), "--name", "ｏｒａｃｌｅ ﬁne", "--db", str(db)]) == 0
    assert "as entry #2 ('oracle fine')" in capsys.readouterr().out
    other = tmp_path / "other.sqlite"
    name = "Ünïcödé エージェント"
    assert main(["submit", str(runs["lucky"]), "--name", name, "--db", str(other)]) == 0
    assert [name for _, name, _, _ in Store(db).submissions()] == ["random", "oracle fine"]
    assert [name for _, name, _, _ in Store(other).submissions()] == [name]


def test_markdown_fields_are_never_markup() -> None:
    """Issue 25: a name `[click](http://...)` or `![x](...)` became a live link or image in
    `render --markdown`. Every field is escaped; rendered by markdown-it (CommonMark with GFM
    tables), no link, image, emphasis, code or HTML comes out, and the text reads as typed."""
    markdown_it = pytest.importorskip("markdown_it")
    from leaderboards.store import Entry

    name = "[click](http://evil.example) ![x](http://evil.example/i.png) <b>b</b> **s** `c` ~~d~~"
    agent = "www.evil.example user@evil.example $x$ | # _e_ \\"
    figures = (0, 8, 0, 8, 1.0, 0.6756, 1.0, 0.5, 2.0, 1.0)
    entry = Entry(1, name, agent, "", "0.1.0", "2026-01-01T00:00:00Z", SOKOBAN, "{}", *figures)
    text = markdown_tables({(SOKOBAN, '{"task":"[a](http://x)"}'): [entry]})
    page = markdown_it.MarkdownIt("commonmark").enable("table").render(text)
    heading, note, rest = page.split("\n", 2)
    table, after = rest.split("</table>\n")
    assert heading == "<h3>agentgym/Sokoban-v0 (task='[a](http://x)')</h3>"
    # The page's own markup: the notes above and below the table, in italics.
    assert note.startswith("<p><em>ranked entries need")
    assert after.startswith("<p><em>Names and agents are self-reported: the replay checks")
    for tag in ("<a ", "<img", "<b>", "<strong>", "<em>", "<code>", "<del>", "<s>"):
        assert tag not in table, (tag, table)
    # Hand-worked escapes of the agent field (GitHub's bare autolinks need `:`, `.` or `@`).
    assert "www\\.evil\\.example user\\@evil\\.example \\$x\\$ \\| \\# \\_e\\_ \\\\" in text
    cells = table.split("<tbody>")[1]
    assert html.escape(name, quote=False) in cells
    assert html.escape(agent, quote=False) in cells


def test_a_database_from_elsewhere_is_shown_inert_or_refused_clearly(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: `show` printed some columns of the database as they were (a date holding
    `ESC [ 2 J` cleared the terminal), and a column of the wrong type crashed it with a
    traceback. Every column is printed inert now, and a row of the wrong shape is one clear
    error line, exit status 2."""
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(
            "UPDATE submissions SET submitted = ?, agentgym_version = ?, name = ?",
            ("\x1b[2J2026-01-01T00:00:00Z", "0.1\x1b[31m", "n\u200bame\x1b]0;t\x07"),
        )
        conn.commit()
    assert main(["show", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert main(["render", "--markdown", "-", "--db", str(db)]) == 0
    rendered = capsys.readouterr().out
    for text in (shown, rendered):
        assert not any(ch in text for ch in "\x1b\x07\u200b"), repr(text)
    # The date is cut to 10 characters, then made inert.
    assert "\\x1b[2J2026-0" in shown and "0.1\\x1b[31m" in shown
    assert "n\\u200bame\\x1b]0;t\\x07" in shown
    for column, value, message in (
        ("mean_return", "high", "the mean_return of entry #1 is not a finite number (found: str)"),
        ("env_kwargs", "{not json", "the env_kwargs of entry #1 is not a JSON object (found: str)"),
        ("episodes", 2.5, "the episodes of entry #1 is not an integer (found: float)"),
        ("env_id", b"\x1b", "the env_id of entry #1 is not text (found: bytes)"),
    ):
        bad = tmp_path / f"bad-{column}.sqlite"
        bad.write_bytes(db.read_bytes())
        with closing(sqlite3.connect(bad)) as conn:
            conn.execute(f"UPDATE results SET {column} = ?", (value,))
            conn.commit()
        for command in (["show"], ["render", "--markdown", "-"]):
            assert main([*command, "--db", str(bad)]) == 2
            err = capsys.readouterr().err
            last = err.splitlines()[-1]  # after the note on the baselines not stored
            assert last.startswith(f"leaderboards {command[0]}: {bad} is not a usable leaderboard")
            assert f"database ({message}); pass another --db" in last, err
    # A stored bundle that is not zlib-compressed JSON: the rebuild says so, changes nothing.
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE submissions SET bundle = ?", (b"not zlib",))
        conn.commit()
    before = sha(db)
    folder = tmp_path / "baselines"
    folder.mkdir()
    (folder / "oracle.json").write_bytes(runs["oracle"].read_bytes())
    assert main(["rebuild", "--db", str(db), "--from", str(folder)]) == 2
    err = capsys.readouterr().err
    assert (
        "is not a usable leaderboard database (the stored bundle of entry #1 cannot be read)" in err
    )
    assert sha(db) == before


def test_deep_json_is_one_refusal_line(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before = sha(db)
    text = runs["oracle"].read_text()
    # 100,000 levels deep inside a free-form field, and 40 levels (over the 32 allowed).
    for depth in (100_000, 40):
        deep = "[" * depth + "]" * depth
        bundle = text.replace('"eval_config": {', f'"deep": {deep}, "eval_config": {{', 1)
        code, out, err = submit(bundle, db, tmp_path, capsys)
        assert_refused_cleanly(code, out, err, 2, "nests JSON arrays/objects more than 32 deep")
    # Numbers JSON allows but no bundle holds: refused unread (int64 and float range).
    huge = text.replace('"eval_config": {', '"huge": ' + "9" * 5000 + ', "eval_config": {', 1)
    for bundle, message in (
        (huge, "an integer of 5000 digits is out of range"),
        (huge.replace("9" * 5000, "1" + "0" * 400), "an integer of 401 digits is out of range"),
        (huge.replace("9" * 5000, "1e400"), "a number of 5 characters overflows a float"),
        (huge.replace("9" * 5000, "-1" + "0" * 19), "an integer of 20 digits is out of range"),
    ):
        code, out, err = submit(bundle, db, tmp_path, capsys)
        assert_refused_cleanly(code, out, err, 2, message)
    reward = load(runs["oracle"])
    reward["runs"][0]["env_kwargs"] = {"format_penalty": -1.0}
    text_kw = json.dumps(reward).replace(
        '"format_penalty": -1.0', '"format_penalty": -1' + "0" * 400
    )
    code, out, err = submit(text_kw, db, tmp_path, capsys)
    assert_refused_cleanly(code, out, err, 2, "an integer of 401 digits is out of range")
    # A lone surrogate, spelt as a JSON escape, in any string: no database can store it as text.
    lone = load(runs["oracle"])
    lone["agent"]["name"] = "\ud800"
    code, out, err = submit(json.dumps(lone), db, tmp_path, capsys)
    assert_refused_cleanly(code, out, err, 2, "holds a string that is not valid Unicode")
    # A structure the schema allows but a check does not expect is malformed too.
    bad = load(runs["oracle"])
    bad["runs"][0]["env_kwargs"] = {"dim_room": [[[6]], 6]}
    code, out, err = submit(bad, db, tmp_path, capsys)
    assert_refused_cleanly(code, out, err, 1, "dim_room must be two ints in [3, 10]")
    assert sha(db) == before


def test_no_refusal_reveals_a_file_the_bundle_names(
    tmp_path: Path, db: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundle names a file on the verifier's machine as its level file: whether the recorded
    digest is right or wrong, the file missing or a folder, the refusal is one and the same (no
    digest oracle) and quotes neither the file nor any digest."""
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY=SECRET-TOKEN-123\n")
    digest = sha(secret)
    base = load(runs["random"])
    before = sha(db)
    refusals = set()
    for path, recorded in (
        (secret, digest),  # right digest: the env then fails to parse it
        (secret, "0" * 64),  # wrong digest
        (tmp_path / "missing.xsb", digest),
        (tmp_path, digest),  # a folder
    ):
        bundle = copy.deepcopy(base)
        bundle["runs"][0]["env_kwargs"] = {"level_file": str(path)}
        bundle["runs"][0]["env_files"] = {"level_file": recorded}
        code, out, err = submit(bundle, db, tmp_path, capsys)
        assert code == 1 and out == "" and err.count("\n") == 1, err
        assert "SECRET" not in err and "API_KEY" not in err
        assert digest[:6] not in err
        refusals.add(err.replace(str(path), "PATH"))
    assert sha(db) == before
    # The right digest gets past the file check to a parse error, which says the same thing.
    assert len(refusals) == 1, refusals
    assert "is not the one the run recorded" in refusals.pop()


# ----------------------------------------------------------------------------- CLI


def test_a_bad_name_is_a_usage_error_and_creates_no_database(
    tmp_path: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    fresh = tmp_path / "fresh.sqlite"
    for name, message in (
        ("caf\udce9", "--name is not valid Unicode text"),  # a Latin-1 byte, surrogate-escaped
        ("x" * 201, "--name must be 1 to 200 characters"),
        ("", "--name must be 1 to 200 characters"),
    ):
        code = main(["submit", str(runs["oracle"]), "--name", name, "--db", str(fresh)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"leaderboards submit: {message}"), err
        assert err.count("\n") == 1
        assert not fresh.exists()


def test_show_an_unknown_env_is_an_error(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--env", "Nope-v0", "--db", str(db)]) == 2
    assert "unknown environment id 'Nope-v0'" in capsys.readouterr().err
    assert main(["show", "--env", "FrozenLake-v0", "--db", str(db)]) == 0
    assert capsys.readouterr().out == "no entries on agentgym/FrozenLake-v0 yet\n"


def test_a_verifier_config_supplies_the_settings(runs: dict[str, Path]) -> None:
    """The verifier's own settings reach the environment; the bundle's never do."""
    config = VerifierConfig(env_settings={SOKOBAN: {"render_mode": "ansi"}})
    verified = verify_bundle(load(runs["oracle"]), config)
    assert verified.runs[0].summary["successes"] == 8


def test_without_jsonschema_the_install_line_is_named(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 16: `leaderboards` without jsonschema names its extra. (A ``None`` entry in
    ``sys.modules`` is how Python itself marks a module as not importable.)"""
    import sys

    monkeypatch.setitem(sys.modules, "jsonschema", None)
    assert main(["show", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "needs jsonschema" in err and "pip install 'agentgym[leaderboard]'" in err


def test_the_nesting_scan_ignores_brackets_inside_strings() -> None:
    from agentgym.bundle import _nesting_over

    assert _nesting_over(json.dumps({"action": "[" * 100 + '\\"{' * 50}), 2) == 0
    assert _nesting_over('{"a": [[1]]}', 3) == 0
    assert _nesting_over('{"a": [[[1]]]}', 3) == 9  # the fourth bracket, 1-based
