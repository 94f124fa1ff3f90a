"""agentgym.provenance: what a run records about its code, on git repositories made here."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import agentgym
from agentgym import provenance
from tests.helpers import git, git_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="no git")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A work tree with one commit: the trainer, two envs and a doc (tests.helpers.git_repo)."""
    return git_repo(tmp_path / "repo")


def test_a_clean_checkout_records_its_commit_and_versions(repo):
    p = provenance.describe(repo)
    assert p["source"] == "git"
    assert p["commit"] == git(repo, "rev-parse", "HEAD") and len(p["commit"]) == 40
    assert p["dirty"] is False and p["dirty_paths"] == [] and p["diff_sha256"] is None
    assert p["packages"]["numpy"] == importlib.metadata.version("numpy")
    for name in ("torch", "transformers"):  # from the installed metadata; nothing is imported
        installed = importlib.util.find_spec(name) is not None
        assert p["packages"][name] == (importlib.metadata.version(name) if installed else None)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["time"])
    # A changed doc is not code: the checkout stays clean.
    (repo / "docs" / "report.md").write_text("# regenerated\n")
    assert provenance.describe(repo)["dirty"] is False


def test_uncommitted_code_is_dirty_with_the_hash_of_its_diff(repo):
    (repo / "baselines" / "trainer.py").write_text("lr = 2\n")
    p = provenance.describe(repo)
    assert p["dirty"] is True and p["dirty_paths"] == ["baselines/trainer.py"]
    diff = subprocess.run(
        ["git", "diff", "--binary", "HEAD", "--", *provenance.CODE_PATHS],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    assert b"-lr = 1\n+lr = 2\n" in diff
    assert p["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    # An untracked code file counts too: its path, a NUL and its bytes follow the diff.
    (repo / "baselines" / "new.py").write_text("x = 1\n")
    p = provenance.describe(repo)
    assert p["dirty_paths"] == ["baselines/new.py", "baselines/trainer.py"]
    expected = hashlib.sha256(diff + b"baselines/new.py\0x = 1\n").hexdigest()
    assert p["diff_sha256"] == expected


def test_an_installed_package_is_described_by_its_version():
    p = provenance.describe(None)
    assert (p["source"], p["commit"], p["dirty"], p["diff_sha256"]) == ("installed",) + (None,) * 3
    assert p["agentgym_version"] == agentgym.__version__


def test_record_writes_the_file_and_a_resume_appends(repo, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    first = provenance.record(run, root=repo)
    assert json.loads((run / "provenance.json").read_text()) == first
    (repo / "baselines" / "trainer.py").write_text("lr = 3\n")
    git(repo, "commit", "-q", "-am", "two")
    data = provenance.record(run, resumed=True, root=repo)
    assert data["commit"] == first["commit"]
    assert [r["commit"] for r in data["resumed"]] == [git(repo, "rev-parse", "HEAD")]
    assert json.loads((run / "provenance.json").read_text()) == data
    # A fresh run in the folder starts the record again.
    assert "resumed" not in provenance.record(run, root=repo)
    assert [p.name for p in run.iterdir()] == ["provenance.json"]  # no temp file left


def test_a_result_is_stale_when_its_paths_changed_since_its_commit(repo):
    old = provenance.describe(repo)
    paths = ["baselines/trainer.py", "agentgym/envs/bandit.py"]
    assert provenance.stale_reason(old, paths, repo) is None
    # Second commit: the trainer changes.
    (repo / "baselines" / "trainer.py").write_text("lr = 2\n")
    git(repo, "commit", "-q", "-am", "two")
    assert provenance.changed_since(old["commit"], paths, repo) == ["baselines/trainer.py"]
    assert provenance.stale_reason(old, paths, repo) == (
        f"baselines/trainer.py changed since {old['commit'][:12]}"
    )
    # A result that reads only the env is still current, and so is one made at the new commit.
    assert provenance.stale_reason(old, ["agentgym/envs/bandit.py"], repo) is None
    assert provenance.stale_reason(provenance.describe(repo), paths, repo) is None
    # Folders as paths; an uncommitted change counts as a change since.
    (repo / "agentgym" / "envs" / "bandit.py").write_text("arms = 3\n")
    assert provenance.changed_since(old["commit"], ["agentgym"], repo) == [
        "agentgym/envs/bandit.py"
    ]


def test_other_reasons_a_result_is_stale(repo):
    paths = ["baselines"]
    assert provenance.stale_reason(None, paths, repo).startswith("no provenance recorded")
    assert provenance.stale_reason({"commit": None}, paths, repo).startswith("not made from a git")
    unknown = {"commit": "0" * 40}
    assert (
        provenance.stale_reason(unknown, paths, repo)
        == "commit 000000000000 is not in this repository"
    )
    assert provenance.changed_since("0" * 40, paths, repo) is None
    head = git(repo, "rev-parse", "HEAD")
    dirty = {"commit": head, "dirty_paths": ["baselines/trainer.py"]}
    assert provenance.stale_reason(dirty, paths, repo) == (
        f"made with uncommitted changes to baselines/trainer.py (at {head[:12]})"
    )
    assert provenance.stale_reason(dirty, ["agentgym"], repo) is None  # not under the paths
    # A run resumed by code whose paths changed since is stale through its later session.
    resumed = {"commit": head, "resumed": [{"commit": "f" * 40}]}
    assert provenance.stale_reason(resumed, paths, repo) == (
        "commit ffffffffffff is not in this repository"
    )
    assert provenance.stale_reason({"commit": head}, paths, None).startswith("this code is not")
