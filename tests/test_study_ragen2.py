"""The RAGEN-2 study runner: its statistics on hand values, and ``--quick`` end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agentgym import provenance
from baselines.studies.ragen2 import (
    RESULT_CODE,
    load_study,
    main,
    mark_stale,
    paired_t,
    result_code,
    shared_runs,
    spearman,
)
from tests.helpers import ROOT, assert_records_this_code, git, git_repo


def test_spearman_hand_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    # ranks (1, 2, 3, 4) vs (1, 2, 4, 3): 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    # ties share their mean rank: (1.5, 1.5, 3) vs (1, 2, 3): Pearson of ranks = 0.8660254
    assert spearman([5, 5, 7], [1, 2, 3]) == pytest.approx(math.sqrt(3) / 2)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3])) and math.isnan(spearman([1, 2], [1, 2]))


def test_paired_t_hand_values():
    # diffs 0.1, 0.3: mean 0.2, sd 0.141421, t(1) = 12.706: half-width 12.706 * 0.1 = 1.2706
    s = paired_t([0.1, 0.3])
    assert s["mean"] == pytest.approx(0.2) and s["low"] == pytest.approx(0.2 - 1.2706)
    # diffs 0, .1, .2, .1, .1: mean 0.1, SS 0.02, sd sqrt(0.02 / 4) = 0.0707107;
    # t(4) = 2.776: half-width 2.776 * 0.0707107 / sqrt(5) = 0.0877848
    s = paired_t([0.0, 0.1, 0.2, 0.1, 0.1])
    assert s["high"] == pytest.approx(0.1877848, abs=1e-6)
    assert math.isnan(paired_t([0.5])["low"])


def test_spec_quick_replaces_sections():
    full, quick = load_study(), load_study(quick=True)
    assert len(full["claims"]["filtering"]["seeds"]) == 5
    assert quick["claims"]["filtering"]["seeds"] == [0, 1]
    assert set(full["claims"]["filtering"]["arms"]) == {"none", "linear", "softmax"}


def test_a_spec_may_hold_some_claims_but_only_known_ones(tmp_path):
    from baselines.studies.ragen2 import SPEC

    smol = load_study(SPEC.with_name("ragen2_smollm2.yaml"))
    assert set(smol["claims"]) == {"collapse"} and smol["model"] == "embedded"
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: tiny\nclaims:\n  colapse: {envs: [x], seeds: [0], arms: {}}\n")
    with pytest.raises(ValueError, match="claims must be some of collapse, filtering"):
        load_study(bad)
    bad.write_text("model: tiny\nclaims:\n  collapse: {envs: [x], arms: {}}\n")
    with pytest.raises(ValueError, match="claims.collapse needs envs, seeds and arms"):
        load_study(bad)
    # (c) is decided on its own sweep, so it needs arms too (it once read every run instead).
    bad.write_text("model: tiny\nclaims:\n  correlation: {envs: [x], seeds: [0], arms: {}}\n")
    with pytest.raises(ValueError, match="claims.correlation needs envs, seeds and arms"):
        load_study(bad)


def test_a_study_without_claim_c_draws_no_correlation_scatter(tmp_path):
    """Two runs of claim (a) make no correlation; the committed SmolLM2 report shows none."""
    from baselines.studies.ragen2 import _plots

    committed = Path(__file__).resolve().parents[1] / "docs" / "reproduction-smollm2"
    runs = json.loads((committed / "results.json").read_text())["runs"]
    assert sorted(r["arm"] for r in runs) == ["control", "regularised"]
    (tmp_path / "correlation.png").write_bytes(b"stale")  # from an earlier report in the folder
    assert _plots(runs, tmp_path, scatter=False) == ["entropy_mi.png"]
    assert (tmp_path / "entropy_mi.png").stat().st_size > 0
    assert not (tmp_path / "correlation.png").exists()
    assert "correlation.png" not in (committed.parent / "reproduction-smollm2.md").read_text()


def test_the_code_of_a_result_is_named_once_and_exists():
    assert result_code("agentgym/Bandit-v0") == [*RESULT_CODE, "agentgym/envs/bandit.py"]
    assert result_code("agentgym/FrozenLake-v0")[len(RESULT_CODE) :] == [
        "agentgym/envs/frozen_lake.py",
        "agentgym/solvers/frozen_lake.py",
    ]
    # Every path names a file of this checkout (a rename would silently stop the check).
    for env_id in ("agentgym/Bandit-v0", "agentgym/FrozenLake-v0", "agentgym/Sokoban-v0"):
        assert all((ROOT / p).is_file() for p in result_code(env_id)), env_id


def test_identical_configurations_run_once_and_are_shared_explicitly():
    """The full study names 66 runs; 18 of them have the resolved configuration of an earlier
    run (issue 23 found these 18 repeating an earlier run exactly). By hand, from ragen2.yaml and
    the defaults (algorithm.entropy_coef 0.001, filter.p 0.9): filtering's softmax arm (defaults)
    is collapse's entropy_holds (0.001, p 0.9) on both envs for seeds 0-2 (6); on Bandit,
    correlation's ent0_none is collapse's control, ent01_none its regularised, ent001_softmax
    its entropy_holds, ent001_none filtering's none (4 x 3 seeds)."""
    from baselines.studies.ragen2 import _runs, _short, _train_overrides

    spec = load_study()
    runs = _runs(spec)
    settings = [_train_overrides(r, Path("warm") / _short(r["env"]), spec) for r in runs]
    made_by = shared_runs(settings)

    def name(r):
        return (r["claim"], _short(r["env"]), r["arm"], r["seed"])

    shared = {name(runs[i]): name(runs[j]) for i, j in enumerate(made_by) if i != j}
    expected = {}
    for seed in (0, 1, 2):
        for env in ("Bandit-v0", "FrozenLake-v0"):
            expected[("filtering", env, "softmax", seed)] = ("collapse", env, "entropy_holds", seed)
        for arm, first in (
            ("ent0_none", ("collapse", "control")),
            ("ent01_none", ("collapse", "regularised")),
            ("ent001_softmax", ("collapse", "entropy_holds")),
            ("ent001_none", ("filtering", "none")),
        ):
            expected[("correlation", "Bandit-v0", arm, seed)] = (
                first[0],
                "Bandit-v0",
                first[1],
                seed,
            )
    assert len(runs) == 66 and shared == expected
    # Overrides in another order, or a default spelled out, are the same configuration.
    assert shared_runs([["algorithm.lr=0.1", "train.seed=1"], ["train.seed=1", "algorithm.lr=0.1"],
                        ["algorithm.lr=0.1", "train.seed=1", "algorithm.entropy_coef=0.001"],
                        ["algorithm.lr=0.1", "train.seed=2"]]) == [0, 0, 0, 3]  # fmt: skip


def test_runs_made_by_older_code_are_marked_stale(tmp_path):
    """A checkout with two commits, the second changing the trainer: runs recorded at the first
    are stale, through their RL run or their warm start; a change to another env's module makes
    no Bandit run stale; a run without a record is stale."""
    from baselines.studies.ragen2 import _provenance_lines

    root = git_repo(tmp_path / "repo")
    old = provenance.describe(root)
    (root / "baselines" / "trainer.py").write_text("lr = 2\n")
    git(root, "commit", "-q", "-am", "a newer trainer")
    new = provenance.describe(root)
    (root / "agentgym" / "envs" / "sokoban.py").write_text("walls = 2\n")
    git(root, "commit", "-q", "-am", "another env")
    records = [(new, new), (old, new), (new, old), (None, new)]
    runs = [
        {"claim": "filtering", "env": "agentgym/Bandit-v0", "arm": "none", "seed": seed}
        | {"provenance": rl, "warm_start_provenance": warm}
        for seed, (rl, warm) in enumerate(records)
    ]
    mark_stale(runs, root)
    c = old["commit"][:12]
    assert [r["stale"] for r in runs] == [
        None,
        f"RL run: baselines/trainer.py changed since {c}",
        f"warm start: baselines/trainer.py changed since {c}",
        "RL run: no provenance recorded (made by code older than the record)",
    ]
    # The report counts the runs of each code and lists the stale ones with their reason.
    lines = _provenance_lines(runs, [r for r in runs if r["stale"]])
    per_code = sorted([f"commit `{c}`: 1", f"commit `{new['commit'][:12]}`: 2", "not recorded: 1"])
    assert lines[3] == "RL runs per code: " + "; ".join(per_code) + "."
    assert lines[5].startswith("**3 stale runs**")
    assert (
        f"| filtering | Bandit-v0 | none | 2 | warm start: baselines/trainer.py changed since {c} |"
        in lines
    )
    # A run shared with another claim is listed with the run that made it.
    runs[0]["same_run_as"] = "collapse/Bandit-v0/control/seed0"
    lines = _provenance_lines(runs, [])
    assert lines[5].startswith("1 runs have the configuration (settings and seeds) of a run")
    assert "| filtering | Bandit-v0 | none | 0 | collapse/Bandit-v0/control/seed0 |" in lines


def test_quick_study_end_to_end_and_resume(tmp_path, capsys, monkeypatch):
    out, doc = tmp_path / "study", tmp_path / "docs" / "reproduction.md"
    assert main(["--quick", "--out", str(out), "--doc", str(doc), "--jobs", "2"]) == 0
    results = json.loads((out / "results.json").read_text())
    # The copy beside the report is the same data, self-contained (per-step series of each run).
    assert json.loads((doc.parent / "reproduction" / "results.json").read_text()) == results
    runs = results["runs"]
    # quick: collapse 2 arms x 1 seed, filtering 2 arms x 2 seeds, correlation 2 arms x 1 seed.
    assert len(runs) == 8
    assert all(r["same_run_as"] is None for r in runs)  # quick's (c) has its own seed: no sharing
    for run in runs:
        assert 0.0 <= run["final_val_success"] <= 1.0
        # The series are the run's metrics.jsonl values, step by step (steps 0..3 at most).
        rows = [json.loads(line) for line in open(run["metrics_path"], encoding="utf-8")]
        for key in ("collapse/mi_estimate", "val/success_rate"):
            logged = [[r["step"], r[key]] for r in rows if r.get(key) is not None]
            assert run["series"][key] == logged and {x for x, _ in logged} <= {0, 1, 2, 3, 4}
        assert run["series"]["val/success_rate"][-1][1] == run["final_val_success"]
        assert run["run_s"] > 0
        assert (out / "runs" / run["claim"] / "Bandit-v0" / run["arm"] / f"seed{run['seed']}"
                / "done.json").is_file()  # fmt: skip
    claims = results["claims"]
    assert set(claims) == {"collapse", "filtering", "correlation"}
    assert all(isinstance(c["reproduced"], bool) for c in claims.values())
    assert claims["filtering"]["differences"]["Bandit-v0/softmax"]["n"] == 2
    # (c) is computed on its own sweep; the pooled figures read all 8 runs.
    assert claims["correlation"]["runs"] == 2
    assert claims["correlation"]["pooled_all_runs"]["runs"] == 8
    text = doc.read_text()
    assert "| (b) SNR filtering helps |" in text and "Command: `python -m baselines.studies" in text
    assert (doc.parent / "reproduction" / "entropy_mi.png").is_file()
    assert (doc.parent / "reproduction" / "correlation.png").is_file()
    # Every run records the code of its RL run and of its warm start; made just now, by this
    # code, none is stale unless it ran on uncommitted changes.
    for run in runs:
        for record in (run["provenance"], run["warm_start_provenance"]):
            assert_records_this_code(record)
        assert run["stale"] is None or "uncommitted changes" in run["stale"]
    assert_records_this_code(results["provenance"])
    assert "## Provenance" in text and "stale runs (made by older code): " in text
    # Resume: every run is done, so the second call only recomputes the statistics. Without
    # --doc, from the checkout's root, a quick study writes its report into its results folder
    # and leaves docs/ as it was, byte for byte (it once overwrote docs/reproduction.md).
    before = {p: p.stat().st_mtime for p in out.glob("runs/**/done.json")}
    docs = {p: p.read_bytes() for p in (ROOT / "docs").rglob("*") if p.is_file()}
    monkeypatch.chdir(ROOT)
    assert main(["--quick", "--out", str(out)]) == 0
    assert {p: p.read_bytes() for p in (ROOT / "docs").rglob("*") if p.is_file()} == docs
    assert (out / "reproduction.md").read_text().startswith("# RAGEN-2's claims")
    assert (out / "reproduction" / "entropy_mi.png").is_file()
    assert {p: p.stat().st_mtime for p in out.glob("runs/**/done.json")} == before
    assert "reproduced=" in capsys.readouterr().out
