"""The install the README states (editable, ``editable_mode=compat``) imports the real package
even when Python starts in a folder that holds a clone named ``agentgym`` (issue 16).

With setuptools' default editable finder that folder wins as an empty namespace package
(``agentgym.__file__`` is None and ``gymnasium.make("agentgym/...")`` finds no namespace); with the
compat path entry (or any non-editable install) the regular package wins.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_folder_holding_a_clone_named_agentgym_imports_the_real_package(tmp_path: Path) -> None:
    (tmp_path / "agentgym").symlink_to(REPO, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        "import agentgym, gymnasium\n"
        "print(agentgym.__file__)\n"
        "env = gymnasium.make('agentgym/Bandit-v0')\n"
        "print(env.reset(seed=0)[0].splitlines()[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()[:2]
    assert Path(first).resolve() == (REPO / "agentgym" / "__init__.py").resolve()
    assert second  # a real Bandit observation
