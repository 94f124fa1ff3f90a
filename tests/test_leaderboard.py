"""The local leaderboard (leaderboards/): replay-verified submission, refusals, SQLite storage,
text/Markdown/HTML rendering (the HTML page in real headless Chromium), committed baselines."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import tempfile
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentgym.eval import evaluate, summarize, wilson_interval
from leaderboards import store as store_module
from leaderboards.__main__ import BASELINES_DIR, main, missing_baselines, rebuild
from leaderboards.render import _md, markdown_tables
from leaderboards.store import Store
from leaderboards.verify import SubmissionError, verify_bundle
from tests.helpers import ROOT, quiet_eval, run_python

Bundles = dict[str, Path]  # the bundles fixture: agent name -> bundle file
Capsys = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real eval bundles: random and oracle on Bandit-v0 and Sokoban-v0, 8 episodes each (the
    fewest a ranked entry needs there)."""
    folder = tmp_path_factory.mktemp("bundles")
    out = {}
    for agent in ("random", "oracle"):
        out[agent] = folder / f"{agent}.json"
        evaluate(
            ["agentgym/Bandit-v0", "agentgym/Sokoban-v0"],
            agent,
            episodes=8,
            seed=0,
            out=out[agent],
            progress=False,
        )
    return out


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def save(tmp_path: Path, bundle: Any, name: str = "edited.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(bundle) if not isinstance(bundle, str) else bundle)
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def submit(path: Path, db: Path, name: str, capsys: Capsys) -> tuple[int, str]:
    code = main(["submit", str(path), "--name", name, "--db", str(db)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def resum(run: dict[str, Any]) -> None:
    """Make a run's episode fields and summary agree with its (edited) steps."""
    for episode in run["episodes"]:
        episode["return"] = sum(s["reward"] for s in episode["steps"])
        episode["turns"] = len(episode["steps"])
    run["summary"] = summarize(run["episodes"])


# ----------------------------------------------------------------------------- round trip


def test_round_trip_eval_submit_show_two_envs(tmp_path: Path) -> None:
    """The whole path through the real command lines, in subprocesses."""
    db = tmp_path / "lb.sqlite"
    env = {**os.environ, "AGENTGYM_LEADERBOARD": str(db)}  # the default DB path

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_python(*args, env=env, cwd=ROOT, timeout=300)

    for agent in ("random", "oracle"):
        out = tmp_path / f"{agent}.json"
        result = run(
            "-m",
            "agentgym.cli",
            "eval",
            "--env",
            "FrozenLake-v0",
            "--env",
            "Sokoban-v0",
            "--agent",
            agent,
            "--episodes",
            "8",
            "--seed",
            "0",
            "--out",
            str(out),
            "--no-progress",
        )
        assert result.returncode == 0, result.stderr
        result = run("-m", "leaderboards", "submit", str(out), "--name", f"{agent} baseline")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"accepted {out} as entry #")
        assert "16 episodes replayed" in result.stdout
    oracle = load(tmp_path / "oracle.json")
    result = run("-m", "leaderboards", "show", "--env", "Sokoban-v0")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "agentgym/Sokoban-v0"
    assert lines[1].split()[:4] == ["#", "name", "agent", "success"]
    # The oracle solves all 8 (Wilson 8/8: [67.6%, 100.0%]) and ranks first; random is second.
    s = oracle["runs"][1]["summary"]
    assert lines[2].split()[:7] == [
        "1",
        "oracle",
        "baseline",
        "oracle",
        "100.0%",
        "[67.6%,",
        "100.0%]",
    ]
    assert lines[2].split()[7] == f"{s['mean_return']:.3f}"
    assert lines[3].split()[:4] == ["2", "random", "baseline", "random"]
    assert lines[4] == "(ranked entries need at least 8 episodes; '-': fewer, listed unranked)"
    # Issue 25: the replay attests the episodes, not who played them.
    assert lines[5:] == [
        "",
        "(names and agents are self-reported: the replay checks the episodes (seeds, actions "
        "and rewards), not who or what played them)",
    ]
    result = run("-m", "leaderboards", "show")
    assert "agentgym/FrozenLake-v0" in result.stdout and "agentgym/Sokoban-v0" in result.stdout


def test_a_level_file_is_keyed_and_checked_by_its_contents(tmp_path: Path, capsys: Capsys) -> None:
    """Two level files at one path are two leaderboards; a file changed after the run is refused
    (the episodes were played on another task)."""
    level = tmp_path / "lvl.xsb"
    easy, other = "#####\n#@$.#\n#####\n", "######\n#@$ .#\n######\n"
    db = tmp_path / "lb.sqlite"
    runs = []
    for text, agent in ((easy, "oracle"), (other, "random")):
        level.write_text(text)
        out = tmp_path / f"{agent}.json"
        bundle = quiet_eval(
            "agentgym/Sokoban-v0",
            agent,
            episodes=2,
            seed=0,
            out=out,
            env_kwargs={"level_file": str(level)},
        )
        sha = hashlib.sha256(text.encode()).hexdigest()
        assert bundle["runs"][0]["env_files"] == {"level_file": sha}
        runs.append((out, sha))
    # The file now holds `other`: the oracle's run (on `easy`) is refused, the database unchanged.
    code, said = submit(runs[0][0], db, "oracle", capsys)
    assert code == 1 and "is not the one the run recorded" in said
    # Neither digest is echoed (a refusal must not leak anything about a file the bundle names).
    assert runs[0][1][:8] not in said and runs[1][1][:8] not in said
    assert not db.exists()
    assert submit(runs[1][0], db, "random", capsys)[0] == 0
    level.write_text(easy)
    assert submit(runs[0][0], db, "oracle", capsys)[0] == 0
    boards = Store(db).entries()
    keys = sorted(json.loads(kwargs)["level_file#sha256"] for _, kwargs in boards)
    assert keys == sorted(sha[:16] for _, sha in runs)  # one board per file content
    # A bundle that names a file but does not record its digest (edited out) is refused.
    stripped = json.loads(runs[0][0].read_text())
    del stripped["runs"][0]["env_files"]
    code, said = submit(save(tmp_path, stripped), db, "x", capsys)
    assert code == 1 and "does not record its SHA-256" in said


def test_stored_figures_come_from_the_replay(
    tmp_path: Path, bundles: Bundles, capsys: Capsys
) -> None:
    db = tmp_path / "lb.sqlite"
    assert submit(bundles["random"], db, "rnd", capsys)[0] == 0
    bundle = load(bundles["random"])
    boards = Store(db).entries()
    assert list(boards) == [("agentgym/Bandit-v0", "{}"), ("agentgym/Sokoban-v0", "{}")]
    for run, entries in zip(bundle["runs"], boards.values(), strict=True):
        (entry,) = entries
        wins = sum(e["success"] for e in run["episodes"])  # counted here, independently
        assert entry.successes == wins and entry.episodes == 8
        assert (entry.ci_low, entry.ci_high) == pytest.approx(wilson_interval(wins, 8))
        returns = [sum(s["reward"] for s in e["steps"]) for e in run["episodes"]]
        assert entry.mean_return == pytest.approx(sum(returns) / 8)
    with sqlite3.connect(db) as conn:
        (blob,) = conn.execute("SELECT bundle FROM submissions").fetchone()
    assert blob[:1] == b"x"  # zlib
    assert next(Store(db).bundles())[2]["runs"] == bundle["runs"]


# ----------------------------------------------------------------------------- refusals


def _edit(bundle: dict[str, Any], how: str) -> Any:
    b = copy.deepcopy(bundle)
    bandit = b["runs"][0]
    if how == "schema: reward as text":
        bandit["episodes"][1]["steps"][0]["reward"] = "1.0"
    elif how == "schema: unknown key":
        b["runs"][1]["episodes"][0]["steps"][0]["bonus"] = 1
    elif how == "schema: no runs":
        b["runs"] = []
    elif how == "unknown env version":
        b["runs"][1]["env_id"] = "agentgym/Sokoban-v9"
        b["runs"][1]["env_version"] = 9
    elif how == "unknown env id":
        bandit["env_id"] = "agentgym/Chess-v0"
    elif how == "reward changed by one step":
        # Sokoban's oracle, episode 2, its first step's reward + 1, with return and summary
        # patched to agree, so that only the replay can tell.
        b["runs"][1]["episodes"][2]["steps"][0]["reward"] += 1.0
        resum(b["runs"][1])
    elif how == "seed swapped between episodes":
        eps = b["runs"][1]["episodes"]
        eps[0]["seed"], eps[1]["seed"] = eps[1]["seed"], eps[0]["seed"]
    elif how == "seeds shifted with the same actions":
        run = b["runs"][1]
        run["seed"] += 1
        run["seeds"] = [s + 1 for s in run["seeds"]]
        for e in run["episodes"]:
            e["seed"] += 1
    elif how == "actions moved to the next seed":
        episodes = b["runs"][1]["episodes"]
        for episode, later in zip(episodes, episodes[1:] + episodes[:1], strict=True):
            episode["moved"] = later["steps"]
        for episode in episodes:
            episode["steps"] = episode.pop("moved")
            episode["success"] = episode["steps"][-1]["success"]
            episode["terminated"] = episode["steps"][-1]["terminated"]
            episode["truncated"] = episode["steps"][-1]["truncated"]
        resum(b["runs"][1])
    elif how == "nondeterministic env id":
        bandit["env_id"] = "agentgym/MiniWoBAll-v0"
    elif how == "MiniWoB task that cannot be replayed":
        bandit["env_id"] = "agentgym/MiniWoB-v0"
        bandit["env_kwargs"] = {"task": "stock-market"}
    elif how == "MiniWoB task set that cannot be replayed":
        bandit["env_id"] = "agentgym/MiniWoB-v0"
        bandit["env_kwargs"] = {"task": None, "task_set": "held_out"}
    elif how == "summary inflated":
        bandit["summary"]["mean_return"] += 0.5
    elif how == "success claimed":
        ep = b["runs"][1]["episodes"][0]
        ep["steps"][-1]["success"] = not ep["steps"][-1]["success"]
        ep["success"] = ep["steps"][-1]["success"]
        resum(b["runs"][1])
    elif how == "episode cut short":
        ep = b["runs"][1]["episodes"][3]
        ep["steps"] = ep["steps"][:-1]
        ep["success"] = bool(ep["steps"] and ep["steps"][-1]["success"])
        ep["terminated"] = ep["truncated"] = False
        resum(b["runs"][1])
    else:
        raise AssertionError(how)
    return b


REFUSALS = {
    "schema: reward as text": "schema violation at runs/0/episodes/1/steps/0/reward: '1.0' is not of type 'number'",
    "schema: unknown key": "schema violation at runs/1/episodes/0/steps/0: Additional properties are not allowed ('bonus' was unexpected)",
    "schema: no runs": "schema violation at runs: [] should be non-empty",
    "unknown env version": "runs/1: unknown environment id 'agentgym/Sokoban-v9'; the installed agentgym 0.1.0 has agentgym/Sokoban-v0 (rerun the eval on it)",
    "unknown env id": "runs/0: unknown environment id 'agentgym/Chess-v0'; `agentgym list` shows the ids",
    "reward changed by one step": "replay mismatch in agentgym/Sokoban-v0, episode 2 (seed 2), step 0: the bundle says reward",
    "seed swapped between episodes": "runs/1/episodes/0 (agentgym/Sokoban-v0): the episode has seed 1 but seeds[0] is 0",
    # Issue 25: the verifier chooses the seeds (the official ones from 0), never the submitter.
    "seeds shifted with the same actions": "runs/1 (agentgym/Sokoban-v0): the run starts at seed 1, but a leaderboard's official seeds are 0, 1, ... and a run covers their first n",
    "actions moved to the next seed": "replay mismatch in agentgym/Sokoban-v0, episode 0 (seed 0)",
    "nondeterministic env id": "runs/0: agentgym/MiniWoBAll-v0 is nondeterministic (the same seed and actions may give another episode), so its runs cannot be verified by replay",
    "MiniWoB task that cannot be replayed": "'stock-market' cannot be replayed exactly (prices redrawn every 100 ms",
    "MiniWoB task set that cannot be replayed": "task_set: 'held_out' holds tasks that cannot be replayed exactly (drag-cube, stock-market, terminal)",
    "summary inflated": "agentgym/Bandit-v0: summary mean_return is",
    "success claimed": "replay mismatch in agentgym/Sokoban-v0, episode 0 (seed 0), step",
    "episode cut short": "the episode stops after",
}


@pytest.fixture()
def populated_db(tmp_path: Path, bundles: Bundles, capsys: Capsys) -> Path:
    db = tmp_path / "lb.sqlite"
    assert submit(bundles["random"], db, "random", capsys)[0] == 0
    return db


@pytest.mark.parametrize("how", list(REFUSALS))
def test_tampered_bundles_are_refused_and_the_db_is_unchanged(
    how: str, tmp_path: Path, bundles: Bundles, populated_db: Path, capsys: Capsys
) -> None:
    edited = save(tmp_path, _edit(load(bundles["oracle"]), how))
    before = digest(populated_db)
    code, output = submit(edited, populated_db, "cheater", capsys)
    assert code == (2 if how.startswith("schema:") else 1)  # malformed: 2
    assert output.startswith("refused: ") and output.count("\n") == 1
    assert REFUSALS[how] in output, output
    assert digest(populated_db) == before
    # The untouched bundle is still accepted: the refusal was about the edit.
    assert submit(bundles["oracle"], populated_db, "oracle", capsys)[0] == 0


def test_refusals_of_files(
    tmp_path: Path, bundles: Bundles, populated_db: Path, capsys: Capsys
) -> None:
    before = digest(populated_db)
    text = bundles["oracle"].read_text()
    cases = {
        "malformed JSON": (save(tmp_path, text[: len(text) // 2], "cut.json"), "is not valid JSON"),
        "not an object": (save(tmp_path, "[1, 2]", "list.json"), "holds a JSON list"),
        "not UTF-8": (save(tmp_path, "", "bin.json"), "is not UTF-8"),
        "missing": (tmp_path / "nope.json", "no such file"),
        "duplicate": (bundles["random"], "duplicate submission: the same episodes"),
        # A NaN reward would compare unequal to everything and slip past tolerance checks.
        "NaN reward": (
            save(
                tmp_path, re.sub(r'"reward": [-0-9.e]+', '"reward": NaN', text, count=1), "nan.json"
            ),
            "NaN is not a JSON number",
        ),
    }
    cases["not UTF-8"][0].write_bytes(b'{"format": "\xff"}')
    # 100 MB, sparse: the size is checked with os.stat before anything is read.
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(100 * 1000 * 1000)
    cases["100 MB"] = (big, "is 95.4 MiB, over the 64.0 MiB limit")
    for name, (path, message) in cases.items():
        code, output = submit(path, populated_db, "x", capsys)
        assert code == (1 if name == "duplicate" else 2), name  # all but one are malformed
        assert message in output, (name, output)
        assert digest(populated_db) == before, name
    # The same bundle under another name is still a duplicate (names do not change results).
    code, output = submit(bundles["random"], populated_db, "another name", capsys)
    assert code == 1 and "as entry #1 ('random')" in output


def test_a_refused_first_submission_creates_no_database(
    tmp_path: Path, bundles: Bundles, capsys: Capsys
) -> None:
    db = tmp_path / "new.sqlite"
    edited = save(tmp_path, _edit(load(bundles["oracle"]), "reward changed by one step"))
    assert submit(edited, db, "x", capsys)[0] == 1
    assert not db.exists()


def test_a_failure_inside_the_transaction_rolls_back(
    tmp_path: Path, bundles: Bundles, populated_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The submission row and the first result row are written, then the write fails."""
    verified = verify_bundle(load(bundles["oracle"]))
    real_rows = store_module._result_rows

    def failing_rows(sid: int, v: Any):
        rows = real_rows(sid, v)
        yield next(rows)
        raise OSError("disk full (injected)")

    monkeypatch.setattr(store_module, "_result_rows", failing_rows)
    before = digest(populated_db)
    with pytest.raises(OSError, match="injected"):
        Store(populated_db).add(verified, "oracle")
    assert digest(populated_db) == before
    assert Store(populated_db).count() == 1


def test_empty_name_is_refused(tmp_path: Path, bundles: Bundles) -> None:
    with pytest.raises(SubmissionError, match="--name must not be empty"):
        Store(tmp_path / "x.sqlite").add(verify_bundle(load(bundles["oracle"])), "  ")


# ----------------------------------------------------------------------------- rendering


@pytest.fixture()
def three_entries(tmp_path: Path, bundles: Bundles, capsys: Capsys) -> Path:
    db = tmp_path / "lb.sqlite"
    for name in ("random", "oracle"):
        assert submit(bundles[name], db, name, capsys)[0] == 0
    third = tmp_path / "third.json"
    quiet_eval("agentgym/Bandit-v0", "random", episodes=8, seed=0, agent_seed=5, out=third)
    assert submit(third, db, "random <seed 5>", capsys)[0] == 0
    return db


def test_markdown_table(three_entries: Path) -> None:
    boards = Store(three_entries).entries()
    text = markdown_tables(boards)
    lines = text.splitlines()
    assert lines[0] == "### agentgym/Bandit-v0"
    assert lines[2] == "_ranked entries need at least 8 episodes; '-': fewer, listed unranked._"
    assert lines[4] == (
        "| # | name | agent | success (95% CI) | mean return | mean turns | valid | episodes "
        "| seeds |"
    )
    assert lines[5] == "|---:|---|---|---:|---:|---:|---:|---:|---:|"
    bandit = boards[("agentgym/Bandit-v0", "{}")]
    assert len([line for line in lines[6:] if line.startswith("| ")]) >= len(bandit)
    e = bandit[0]
    assert lines[6] == (
        f"| 1 | oracle | oracle | 100.0% [67.6%, 100.0%] | {e.mean_return:.3f} | 1.00 | 100.0% "
        "| 8 | 0-7 |"
    )


def test_every_rendering_says_names_and_agents_are_self_reported(three_entries: Path) -> None:
    """Issue 25: the page called entries verified, though a replay cannot attest who played.
    Text, Markdown and HTML each say that names and agents are self-reported."""
    from leaderboards.render import SELF_REPORTED, html_page, text_tables

    boards = Store(three_entries).entries()
    assert SELF_REPORTED == (
        "names and agents are self-reported: the replay checks the episodes (seeds, actions and "
        "rewards), not who or what played them"
    )
    assert text_tables(boards).endswith(f"\n\n({SELF_REPORTED})\n")
    assert markdown_tables(boards).endswith(
        "\n\n_Names and agents are self-reported: the replay "
        "checks the episodes (seeds, actions and rewards), not who or what played them._\n"
    )
    page = html_page(boards)
    assert f"accepted; {SELF_REPORTED}." in page
    for text in (text_tables(boards), markdown_tables(boards), page):
        assert "verified" not in text.lower()


def test_cli_db_before_or_after_the_command_and_clear_usage_errors(
    three_entries: Path, bundles: Bundles, tmp_path: Path, capsys: Capsys
) -> None:
    capsys.readouterr()
    assert main(["--db", str(three_entries), "show", "--env", "Bandit-v0"]) == 0
    before = capsys.readouterr().out
    assert main(["show", "--env", "Bandit-v0", "--db", str(three_entries)]) == 0
    assert capsys.readouterr().out == before and "random <seed 5>" in before
    # Not a database: exit 2, says what to do, the file is left as it was.
    bogus = tmp_path / "notes.sqlite"
    bogus.write_text("not sqlite")
    assert main(["show", "--db", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert "is not a usable leaderboard database" in err and "--db" in err
    assert bogus.read_text() == "not sqlite"
    # Rendering creates missing folders (as eval --out does); an unwritable path is exit 2.
    page = tmp_path / "new" / "dir" / "x.html"
    assert main(["--db", str(three_entries), "render", "--html", str(page)]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert main(["--db", str(three_entries), "render", "--html", str(tmp_path)]) == 2
    assert "cannot write" in capsys.readouterr().err
    # No database there: exit 2, named, nothing created; a submit into a missing folder too.
    missing = tmp_path / "typo.sqlite"
    assert main(["show", "--db", str(missing)]) == 2
    assert f"no leaderboard database at {missing}" in capsys.readouterr().err
    assert main(["render", "--markdown", "-", "--db", str(missing)]) == 2
    assert not missing.exists()
    nowhere = tmp_path / "absent" / "lb.sqlite"
    assert main(["rebuild", "--db", str(nowhere), "--from", str(tmp_path / "empty")]) == 2
    assert "the folder of --db" in capsys.readouterr().err
    # Another program's SQLite file is refused, not extended.
    other = tmp_path / "other.sqlite"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.commit()
    assert main(["submit", str(bundles["oracle"]), "--name", "x", "--db", str(other)]) == 1
    assert "SQLite database of something else" in capsys.readouterr().err
    with closing(sqlite3.connect(other)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["notes"]
    for bad in ("nan", "0", "-1", "0.5"):
        assert main(["submit", str(bundles["oracle"]), "--name", "x", "--max-mb", bad]) == 2
        assert "--max-mb must be a number >= 1 (MiB), got" in capsys.readouterr().err
    # A written page leaves no temp file next to it.
    assert main(["--db", str(three_entries), "render", "--markdown", str(tmp_path / "lb.md")]) == 0
    assert (tmp_path / "lb.md").read_text().startswith("### agentgym/")
    assert not list(tmp_path.glob(".lb.md.*"))


def test_markdown_cells_make_markup_inert() -> None:
    # By hand: & < > become entities, ( ) | are backslash-escaped, a newline becomes a space.
    assert _md("<img src=x onerror=alert(1)>|a\nb & c") == (
        "&lt;img src=x onerror=alert\\(1\\)&gt;\\|a b &amp; c"
    )


def _chromium(tmp_path: Path, width: int = 1280, height: int = 900) -> Any:
    """Headless Chromium (Debian's, with its ChromeDriver) in a ``width`` x ``height`` window."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from sandboxes.web.browser import HEADLESS_FLAGS

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path)
    for flag in (*HEADLESS_FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


# Lines of text in each cell of the first table, counted from the text's client rectangles
# (a wrapped text gives one rectangle per line).
_LINES_PER_CELL = """
return Array.from(document.querySelectorAll("table.board")[0].rows).map(function (row) {
  return Array.from(row.cells).map(function (cell) {
    var range = document.createRange();
    range.selectNodeContents(cell);
    var tops = {};
    Array.from(range.getClientRects()).forEach(function (r) { tops[Math.round(r.top)] = 1; });
    return Object.keys(tops).length;
  });
});
"""


def test_html_page_is_readable_at_a_normal_width(
    three_entries: Path, bundles: Bundles, tmp_path: Path, capsys: Capsys
) -> None:
    """Issue 16: at 1280 pixels no interval, seed range or date wraps and the page needs no
    horizontal scrolling, even with a long name; the seeds and the agentgym version are shown.
    The screenshot is kept in the test's folder (leaderboard-1280.png) for a person to look at."""
    import agentgym

    long_name = "a submission with a rather long name, " * 3
    third = tmp_path / "long.json"
    quiet_eval(
        "agentgym/Bandit-v0",
        "random",
        episodes=8,
        agent_seed=9,
        agent_name="SmolLM2-135M-Instruct zero-shot (greedy)",
        out=third,
    )
    assert submit(third, three_entries, long_name, capsys)[0] == 0
    page = tmp_path / "leaderboard.html"
    assert main(["render", "--html", str(page), "--db", str(three_entries)]) == 0
    driver = _chromium(tmp_path)
    try:
        driver.get(page.as_uri())
        lines = driver.execute_script(_LINES_PER_CELL)
        assert lines and all(n == 1 for row in lines for n in row), lines
        width = driver.execute_script("return document.documentElement.scrollWidth")
        inner = driver.execute_script("return document.documentElement.clientWidth")
        assert width <= inner, (width, inner)
        headers = driver.execute_script(
            "return Array.from(document.querySelectorAll('table.board')[0].tHead.rows[0]"
            ".cells).map(function (c) { return c.textContent; })"
        )
        assert headers[-3:] == ["seeds", "agentgym", "submitted"]
        first = driver.execute_script(
            "return Array.from(document.querySelectorAll('table.board')[0].tBodies[0].rows[0]"
            ".cells).map(function (c) { return c.textContent; })"
        )
        assert first[-3] == "0-7" and first[-2] == agentgym.__version__
        # The long name is cut with an ellipsis; the whole of it is in the tooltip.
        cell = driver.execute_script(
            "var t = document.querySelector('td[title^=\"a submission\"]');"
            "return [t.scrollWidth > t.clientWidth, t.getAttribute('title')];"
        )
        assert cell == [True, long_name.strip()]
        driver.save_screenshot(str(tmp_path / "leaderboard-1280.png"))
    finally:
        driver.quit()


def test_html_page_sorts_in_headless_chromium(three_entries: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page = tmp_path / "leaderboard.html"
    assert main(["render", "--html", str(page), "--db", str(three_entries)]) == 0
    text = page.read_text()
    assert "<script src" not in text and "http" not in text.split("<body>")[1]  # no CDN
    boards = Store(three_entries).entries()
    bandit = boards[("agentgym/Bandit-v0", "{}")]
    driver = _chromium(tmp_path)
    try:
        driver.get(page.as_uri())
        tables = driver.find_elements(By.CSS_SELECTOR, "table.board")
        assert [t.get_attribute("data-env") for t in tables] == [
            "agentgym/Bandit-v0",
            "agentgym/Sokoban-v0",
        ]
        table = tables[0]
        assert table.find_element(By.TAG_NAME, "caption").text == "agentgym/Bandit-v0"

        def column(index: int) -> list[str]:
            rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
            return [r.find_elements(By.TAG_NAME, "td")[index].text for r in rows]

        # As stored: ranked by success rate.
        assert column(1) == [e.name for e in bandit]
        headers = table.find_elements(By.TAG_NAME, "th")
        names = [h.text for h in headers]
        by_return = headers[names.index("mean return")]
        by_return.click()
        assert by_return.get_attribute("aria-sort") == "ascending"
        expected = sorted(bandit, key=lambda e: e.mean_return)
        assert column(5) == [f"{e.mean_return:.3f}" for e in expected]
        by_return.click()
        assert by_return.get_attribute("aria-sort") == "descending"
        assert column(5) == [f"{e.mean_return:.3f}" for e in reversed(expected)]
        by_name = headers[names.index("name")]
        by_name.click()
        assert column(1) == sorted(e.name for e in bandit)
        assert by_return.get_attribute("aria-sort") is None
        # The name with markup characters is shown as text, not parsed as HTML.
        assert "random <seed 5>" in column(1)
    finally:
        driver.quit()


# ----------------------------------------------------------------------------- baselines


def test_committed_baselines_replay(tmp_path: Path) -> None:
    """The first 2 episodes of every run of every committed bundle still replay exactly (a
    change to an env that alters episodes must bump its version)."""
    paths = sorted(BASELINES_DIR.glob("*.json"))
    assert {"random.json", "oracle.json"} <= {p.name for p in paths}
    covered = set()
    for path in paths:
        bundle = load(path)
        for run in bundle["runs"]:
            run["seeds"] = run["seeds"][:2]
            run["episodes"] = run["episodes"][:2]
            run["summary"] = summarize(run["episodes"])
            covered.add((bundle["agent"]["name"], run["env_id"]))
        verify_bundle(bundle)
    import agentgym

    # a nondeterministic id has no leaderboard (verify.check_consistency refuses it)
    envs = [e for e, entry in agentgym.registered_envs().items() if not entry.nondeterministic]
    smollm2 = "SmolLM2-135M-Instruct zero-shot (greedy)"
    for agent, what in (("random", "random"), ("oracle", "oracle"), (smollm2, "smollm2")):
        missing = [e for e in envs if (agent, e) not in covered]
        assert not missing, f"no {agent} baseline for {missing}: run make_baselines.sh {what}"


def _baseline_folder(tmp_path: Path, bundles: Bundles) -> Path:
    folder = tmp_path / "baselines"
    folder.mkdir()
    for name in ("random", "oracle"):
        (folder / f"{name}.json").write_bytes(bundles[name].read_bytes())
    return folder


def test_rebuild_keeps_every_entry_and_refuses_to_drop_without_the_flag(
    tmp_path: Path, bundles: Bundles, capsys: Capsys
) -> None:
    """Issue 16: a rebuild deleted the user's own entries. Now every stored entry is replayed
    again and kept (name and time); one that no longer verifies is named and nothing changes,
    unless --drop-unverified is given."""
    folder = _baseline_folder(tmp_path, bundles)
    db = tmp_path / "lb.sqlite"
    assert rebuild(db, folder).baselines == 2
    assert Store(db).count() == 2
    # The user's own entries: one on a level file (made to stop verifying below), one plain.
    level = tmp_path / "mine.xsb"
    level.write_text("#####\n#@$.#\n#####\n")
    mine = quiet_eval(
        "agentgym/Sokoban-v0",
        "oracle",
        episodes=8,
        seed=0,
        out=tmp_path / "mine.json",
        env_kwargs={"level_file": str(level)},
    )
    assert mine["runs"][0]["summary"]["successes"] == 8
    assert submit(tmp_path / "mine.json", db, "my level", capsys)[0] == 0
    third = tmp_path / "third.json"
    quiet_eval("agentgym/Bandit-v0", "random", episodes=8, agent_seed=5, out=third)
    assert submit(third, db, "my agent", capsys)[0] == 0
    times = {name: t for _, name, t, _ in Store(db).submissions() if name.startswith("my ")}
    # A plain rebuild keeps both, under their names and original times.
    assert main(["rebuild", "--db", str(db), "--from", str(folder)]) == 0
    said = capsys.readouterr().out
    assert "2 baseline bundles" in said and "2 earlier entries kept" in said
    kept = {name: t for _, name, t, _ in Store(db).submissions() if name.startswith("my ")}
    assert kept == times and len(kept) == 2
    # The level file changes: that entry no longer verifies. The rebuild names it, says how to
    # drop it, and leaves the database byte for byte as it was.
    level.write_text("######\n#@$ .#\n######\n")
    before = digest(db)
    assert main(["rebuild", "--db", str(db), "--from", str(folder)]) == 2
    *progress, err = capsys.readouterr().err.splitlines()
    ids = {name: sid for sid, name, _, _ in Store(db).submissions()}
    assert progress == [
        "rebuild [1/4] baseline oracle.json ('oracle', 16 episodes)",
        "rebuild [2/4] baseline random.json ('random', 16 episodes)",
        f"rebuild [3/4] entry #{ids['my level']} 'my level' (8 episodes)",
        f"rebuild [4/4] entry #{ids['my agent']} 'my agent' (8 episodes)",
    ]
    assert f"#{ids['my level']} 'my level'" in err and "--drop-unverified" in err
    assert "nothing was changed" in err and "my agent" not in err
    assert digest(db) == before
    # With the flag: exactly the named entry goes, the other stays; the output names it.
    assert main(["rebuild", "--db", str(db), "--from", str(folder), "--drop-unverified"]) == 0
    said = capsys.readouterr().out
    assert f"1 dropped (no longer verify): #{ids['my level']} 'my level'" in said
    assert sorted(name for _, name, _, _ in Store(db).submissions()) == [
        "my agent",
        "oracle",
        "random",
    ]


def test_rebuild_from_a_folder_replaces_the_db_only_when_all_pass(
    tmp_path: Path, bundles: Bundles
) -> None:
    folder = _baseline_folder(tmp_path, bundles)
    db = tmp_path / "lb.sqlite"
    assert rebuild(db, folder).baselines == 2
    assert Store(db).count() == 2
    before = digest(db)
    bad = _edit(load(bundles["oracle"]), "reward changed by one step")
    bad["runs"][1]["episodes"][0]["steps"][0]["action"] += " "  # a new digest
    (folder / "zz-bad.json").write_text(json.dumps(bad))
    with pytest.raises(SubmissionError, match="zz-bad.json: replay mismatch"):
        rebuild(db, folder)
    assert digest(db) == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_rebuild_keeps_ids_and_dates_and_is_repeatable(
    tmp_path: Path, bundles: Bundles, capsys: Capsys
) -> None:
    """Issue 26: a rebuild renumbered the entries and dated every baseline today. Now an entry
    keeps its id and date, a new baseline is dated by its bundle, and rebuilding unchanged inputs
    changes nothing, byte for byte."""
    folder = _baseline_folder(tmp_path, bundles)
    created = {name: load(bundles[name])["created"] for name in ("random", "oracle")}
    # A fresh database: the baselines in file-name order, each dated by its bundle.
    fresh = tmp_path / "fresh.sqlite"
    rebuild(fresh, folder)
    rows = [(sid, name, t) for sid, name, t, _ in Store(fresh).submissions()]
    assert rows == [(1, "oracle", created["oracle"]), (2, "random", created["random"])]
    # An entry submitted before the first rebuild keeps #1; the baselines come after it.
    db = tmp_path / "lb.sqlite"
    third = tmp_path / "third.json"
    quiet_eval("agentgym/Bandit-v0", "random", episodes=8, agent_seed=5, out=third)
    assert submit(third, db, "mine", capsys)[0] == 0
    (mine,) = [(sid, name, t) for sid, name, t, _ in Store(db).submissions()]
    assert mine[0] == 1
    rebuild(db, folder)
    first = list(Store(db).submissions())
    assert [(sid, name, t) for sid, name, t, _ in first] == [
        mine,
        (2, "oracle", created["oracle"]),
        (3, "random", created["random"]),
    ]
    tables, before = markdown_tables(Store(db).entries()), digest(db)
    rebuild(db, folder)
    assert list(Store(db).submissions()) == first
    assert markdown_tables(Store(db).entries()) == tables
    assert digest(db) == before


def test_show_says_how_to_get_the_baselines(
    tmp_path: Path, bundles: Bundles, capsys: Capsys
) -> None:
    """Issue 26: `show` before the first rebuild had no baselines and did not say so."""
    db = tmp_path / "my lb.sqlite"
    assert main(["show", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"no leaderboard database at {db} yet" in err
    assert f"`python -m leaderboards rebuild --db '{db}'`" in err
    assert submit(bundles["random"], db, "mine", capsys)[0] == 0
    shipped = len(list(BASELINES_DIR.glob("*.json")))
    assert main(["show", "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "mine" in captured.out
    assert captured.err == (
        f"leaderboards show: note: {shipped} of the {shipped} baseline bundles shipped in "
        f"leaderboards/baselines are not in {db}; `python -m leaderboards rebuild --db '{db}'` "
        "replays them into it (keeping every entry; a few minutes)\n"
    )
    # Once they are in, no note (a folder of two stands in for the shipped one).
    folder = _baseline_folder(tmp_path, bundles)
    assert missing_baselines(db, folder) == 1
    rebuild(db, folder)
    assert missing_baselines(db, folder) == 0


def test_rebuild_drops_a_window_of_an_entry_accepted_before_issue_25(
    tmp_path: Path, bundles: Bundles, capsys: Capsys
) -> None:
    """A database written before issue 25 may hold two windows of one run as two entries, and
    has no episodes table: a submission to it is refused until a rebuild rewrites it, and the
    rebuild names the repeated window as an entry to drop."""
    folder = _baseline_folder(tmp_path, bundles)
    db = tmp_path / "lb.sqlite"
    assert submit(bundles["random"], db, "mine", capsys)[0] == 0
    prefix = load(bundles["random"])
    prefix["runs"] = prefix["runs"][:1]
    run = prefix["runs"][0]
    run["seeds"], run["episodes"] = run["seeds"][:4], run["episodes"][:4]
    run["summary"] = summarize(run["episodes"])
    # As the old store did: no check of the episodes, so the window is a second entry.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_module, "_stored_overlap", lambda conn, verified: None)
        assert submit(save(tmp_path, prefix, "window.json"), db, "my window", capsys)[0] == 0
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("DROP TABLE episodes")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        conn.commit()
    code, said = submit(bundles["oracle"], db, "oracle", capsys)
    assert code == 1 and "is a leaderboard of an earlier format (schema 1)" in said
    assert f"python -m leaderboards rebuild --db {db}" in said
    # The baselines hold the same random run: "mine" is that baseline's entry (same digest),
    # and the window of it is the one to drop.
    assert main(["rebuild", "--db", str(db), "--from", str(folder)]) == 2
    err = capsys.readouterr().err
    assert (
        "#2 'my window': duplicate submission: its agentgym/Bandit-v0 episodes on seeds 0-3 "
        "are those of entry #1 ('mine'), action for action"
    ) in err
    assert main(["rebuild", "--db", str(db), "--from", str(folder), "--drop-unverified"]) == 0
    assert [(sid, name) for sid, name, _, _ in Store(db).submissions()] == [
        (1, "mine"),
        (3, "oracle"),
    ]
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (
            str(store_module.SCHEMA_VERSION),
        )
        assert conn.execute("SELECT COUNT(*) FROM episodes").fetchone() == (32,)


def test_an_entry_submitted_during_a_rebuild_is_never_lost(
    tmp_path: Path, bundles: Bundles, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    """Issue 25: a submission accepted while a rebuild ran went into the old file, which the
    rebuild then replaced. The rebuild now holds the database's write lock from before it reads
    the entries until the rename: a submission from another thread, made while the rebuild is
    held inside its replay (ordered by joining that thread, no sleeps), is refused with a clear
    message, and submitted again afterwards it is stored."""
    folder = _baseline_folder(tmp_path, bundles)
    db = tmp_path / "lb.sqlite"
    rebuild(db, folder)
    third = tmp_path / "third.json"
    quiet_eval("agentgym/Bandit-v0", "random", episodes=8, agent_seed=5, out=third)
    # Refuse at once, not after 30 s (raising=False: the name is new with the lock).
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.0, raising=False)
    results: list[int] = []

    def submit_from_another_thread() -> None:
        results.append(main(["submit", str(third), "--name", "meanwhile", "--db", str(db)]))

    def progress(line: str) -> None:
        if not results:  # the first bundle: the rebuild has read the stored entries
            other = threading.Thread(target=submit_from_another_thread)
            other.start()
            other.join()

    report = rebuild(db, folder, progress=progress)
    assert report.baselines == 2 and results == [1]
    err = capsys.readouterr().err
    assert err.startswith(f"refused: {db} is being written by another command (a rebuild")
    assert "nothing was stored: try again when it has finished" in err
    assert sorted(name for _, name, _, _ in Store(db).submissions()) == ["oracle", "random"]
    # Once the rebuild is over, the same submission goes in.
    assert main(["submit", str(third), "--name", "meanwhile", "--db", str(db)]) == 0
    assert "meanwhile" in {name for _, name, _, _ in Store(db).submissions()}
