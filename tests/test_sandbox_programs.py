"""The programs that run inside the code sandbox, kept as files in the package and read at run time.

``sandboxes/code/programs/`` holds what the back ends start inside the sandbox (the docker
bootstrap, the process launcher and its bubblewrap and unshare shell forms) and
``agentgym/envs/programs/`` CodeExec's grading harness. These tests check that a wheel ships every
one of them and that the installed package reads them back, and run the ones that can run on
the host (the launchers and the harness, unisolated, on tiny inputs) against values worked out
by hand from the programs' own rules. The docker bootstrap and the unshare set-up run only
inside their sandboxes (tests/test_sandbox_docker.py, tests/test_sandbox_process.py): on the
host the bootstrap would SIGKILL every process of its user.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.envs import code_exec_channel as channel
from agentgym.envs import code_exec_grading
from sandboxes.code.base import PROGRAMS, program_text

REPO = Path(__file__).resolve().parent.parent
SANDBOX_PROGRAMS = REPO / "sandboxes" / "code" / "programs"
GRADING_PROGRAMS = REPO / "agentgym" / "envs" / "programs"


def test_every_program_file_is_listed_and_ascii() -> None:
    assert sorted(p.name for p in SANDBOX_PROGRAMS.glob("*.*")) == sorted(PROGRAMS)
    assert [p.name for p in GRADING_PROGRAMS.glob("*.*")] == ["code_exec_harness.py"]
    for name in PROGRAMS:
        assert program_text(name) == (SANDBOX_PROGRAMS / name).read_text("utf-8")
        assert program_text(name).isascii(), name  # passed on command lines, whatever the locale
    assert code_exec_grading._HARNESS == (GRADING_PROGRAMS / "code_exec_harness.py").read_text()
    with pytest.raises(ValueError, match="the programs are docker_bootstrap.py, launcher.py"):
        program_text("bootstrap.py")


def test_a_wheel_ships_every_program(tmp_path: Path) -> None:
    """A non-editable install (a wheel, installed with ``pip --target``) reads each program back
    through its own package resources, with the text of the file in the tree."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for package in ("agentgym", "sandboxes", "baselines", "leaderboards"):
        shutil.copytree(REPO / package, src / package, ignore=skip)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    wheel = [
        *pip,
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "-w",
        "dist",
        str(src),
    ]
    out = subprocess.run(wheel, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    (whl,) = (tmp_path / "dist").glob("agentgym-*.whl")
    out = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", "site", str(whl)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    read_back = (
        "import json, sandboxes\n"
        "from sandboxes.code.base import PROGRAMS, program_text\n"
        "from agentgym.envs import code_exec_grading\n"
        "texts = {name: program_text(name) for name in PROGRAMS}\n"
        "texts['code_exec_harness.py'] = code_exec_grading._HARNESS\n"
        "print(json.dumps([[sandboxes.__file__, code_exec_grading.__file__], texts]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    out = subprocess.run(
        [sys.executable, "-c", read_back], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    where, texts = json.loads(out.stdout)
    assert all(Path(w).is_relative_to(tmp_path / "site") for w in where), where
    expected = {name: (SANDBOX_PROGRAMS / name).read_text("utf-8") for name in PROGRAMS}
    expected["code_exec_harness.py"] = (GRADING_PROGRAMS / "code_exec_harness.py").read_text()
    assert texts == expected


# ----------------------------------------------------------------------------- the launchers


def _payload(files: dict[str, bytes]) -> bytes:
    """``<u32 name length><u32 size><name><content>``..., as the launcher's docstring says."""
    out = b""
    for name, body in files.items():
        out += struct.pack("<II", len(name), len(body)) + name.encode() + body
    return out


def _launch(tmp_path: Path, files: dict[str, bytes], fsize: int = -1) -> tuple[str, bytes, int]:
    """Run launcher.py unisolated in ``tmp_path`` (as the process back end's ``none`` isolation
    does); return its stdout, its report and its exit status."""
    pin, pout = os.pipe()
    os.write(pout, _payload(files))  # small: fits in the pipe's buffer
    os.close(pout)
    rin, rout = os.pipe()

    def limit() -> None:
        if fsize > 0:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    cmd = [sys.executable, "-I", "-S", "-c", program_text("launcher.py"), str(pin), str(rout)]
    proc = subprocess.run(
        [*cmd, sys.executable, "."],
        cwd=tmp_path,
        pass_fds=(pin, rout),
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=60,
    )
    os.close(pin)
    os.close(rout)
    with os.fdopen(rin, "rb") as f:
        report = f.read()
    return proc.stdout, report, proc.returncode


def test_launcher_writes_the_files_and_reports_the_exit_status(tmp_path: Path) -> None:
    main = b"import sys\nprint(open('data/x.txt').read())\nsys.exit(3)\n"
    out, report, code = _launch(tmp_path, {"main.py": main, "data/x.txt": b"42"})
    assert (out, report, code) == ("42\n", b"3 0\n", 3)


def test_launcher_reports_a_signal_as_128_plus_its_number(tmp_path: Path) -> None:
    main = b"import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    _, report, code = _launch(tmp_path, {"main.py": main})
    assert (report, code) == (b"137 0\n", 137)  # 128 + SIGKILL (9)


@pytest.mark.parametrize(("size", "disk"), [(4095, b"0"), (4096, b"1")])
def test_launcher_counts_a_file_at_rlimit_fsize_as_a_full_disk(
    tmp_path: Path, size: int, disk: bytes
) -> None:
    """Its rule: a watched file whose size is >= RLIMIT_FSIZE (4096 here) fills the disk, even
    when the write itself succeeded; one byte less does not."""
    main = f"open('big', 'wb').write(b'x' * {size})\n".encode()
    _, report, code = _launch(tmp_path, {"main.py": main}, fsize=4096)
    assert (report, code) == (b"0 " + disk + b"\n", 0)


def test_launcher_closes_its_pipes_in_the_code(tmp_path: Path) -> None:
    """main.py cannot read the payload nor forge the report: both descriptors are closed in it."""
    main = (
        b"import os\n"
        b"for fd in range(3, 64):\n"
        b"    try:\n"
        b"        os.fstat(fd)\n"
        b"        print(fd)\n"
        b"    except OSError:\n"
        b"        pass\n"
    )
    out, report, _ = _launch(tmp_path, {"main.py": main})
    assert (out, report) == ("", b"0 0\n")


def test_bwrap_launcher_runs_main_and_reports(tmp_path: Path) -> None:
    """The bash launcher (unisolated here): output passes through, the report fd is closed in the
    code, and a run that exits 0 reports ``0 0`` (no file system of /work, /tmp, /dev/shm full)."""
    rin, rout = os.pipe()
    main = f"import os, sys\nprint('out')\nprint('err', file=sys.stderr)\nos.fstat({rout})\n"
    main = "try:\n" + "".join("    " + line + "\n" for line in main.splitlines())
    main += "except OSError:\n    print('closed')\n"
    (tmp_path / "main.py").write_text(main)
    bash = shutil.which("bash") or "/bin/bash"
    cmd = [bash, "--noprofile", "--norc", "-c", program_text("bwrap_launcher.sh"), "sh"]
    proc = subprocess.run(
        [*cmd, str(rout), str(16 * 2**20), sys.executable],
        cwd=tmp_path,
        pass_fds=(rout,),
        capture_output=True,
        text=True,
        timeout=60,
    )
    os.close(rout)
    with os.fdopen(rin, "rb") as f:
        report = f.read()
    assert (proc.stdout, proc.stderr, proc.returncode) == ("out\nclosed\n", "err\n", 0)
    assert report == b"0 0\n"


# ----------------------------------------------------------------------------- the harness


def test_harness_writes_one_line_per_call(tmp_path: Path) -> None:
    """Each line hand-derived from the harness's protocol (its docstring): R + the wire JSON of
    what the call returned, E + the exception, N + why the value is not plain data, T for a call
    past its limit, M for an answer whose module code raised. The answer's prints are dropped."""
    solution = (
        "def f(a, b=1):\n"
        "    print('noise')\n"
        "    if a == 'set':\n"
        "        return {1}\n"
        "    if a == 'loop':\n"
        "        while True:\n"
        "            pass\n"
        "    if b == 0:\n"
        "        raise ValueError('no')\n"
        "    return a // b, [a]\n"
    )
    calls = [((7,), {"b": 2}), ((1, 0), {}), (("set",), {}), (("loop",), {}), ((-7, 2), {})]
    batch = [
        {
            "entry_point": "f",
            "prelude": "",
            "solution": solution,
            "calls": [channel.dumps(call) for call in calls],
            "per_test_timeout_s": 5,
        },
        {
            "entry_point": "g",
            "prelude": "",
            "solution": "raise RuntimeError('at import')\n",
            "calls": [channel.dumps(((1,), {}))],
            "per_test_timeout_s": 5,
        },
    ]
    (tmp_path / "spec.json").write_text(json.dumps(batch))
    shutil.copy(channel.__file__, tmp_path / "channel.py")
    (tmp_path / "main.py").write_text(code_exec_grading._HARNESS)
    proc = subprocess.run(
        [sys.executable, "-I", "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == [
        "STARTED",
        '0 0 R{"t":[3,[7]]}',  # 7 // 2 = 3, as a tuple on the wire
        "0 1 EValueError: no",
        "0 2 NNotPlainData: a value of type 'set': only None, bool, int, float, str, list, "
        "tuple (or a namedtuple) and dict (or a Counter, OrderedDict or defaultdict) count",
        "0 3 T",
        '0 4 R{"t":[-4,[-7]]}',  # floor division: -7 // 2 = -4
        "1 M ERuntimeError: at import",
    ]
