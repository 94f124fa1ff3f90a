"""Per-run control groups for the process back end: one run = one memory, pids and CPU budget.

Linux control groups limit a *group* of processes, so that a run's forked children share its
budget (``memory_mb`` for all of them together, ``max_processes`` processes in all) and one run's
fork bomb cannot take the processes or memory of another run. Two layouts exist and neither is
assumed; :func:`detect` looks at ``/proc/self/cgroup`` and ``/proc/self/mounts``:

* **cgroup v2** (one unified hierarchy): a run's group gets ``memory.max``, ``memory.swap.max = 0``,
  ``pids.max`` and ``cpu.max``; it is created under this process's own group, whose
  ``cgroup.subtree_control`` must enable ``memory`` and ``pids`` (a delegated subtree, or root).
  Counters read back: ``memory.events`` ``oom_kill``, ``pids.events`` ``max``.
* **cgroup v1** (one hierarchy per controller): groups under this process's group in the
  ``memory`` and ``pids`` hierarchies (and ``cpu`` when mounted) with ``memory.limit_in_bytes``
  (and ``memory.memsw.limit_in_bytes``, no swap, when swap accounting exists), ``pids.max``,
  ``cpu.cfs_quota_us``. Counters: ``memory.oom_control`` ``oom_kill``, ``pids.events`` ``max``.

Kernel documentation: Documentation/admin-guide/cgroup-v2.rst and
Documentation/admin-guide/cgroup-v1/{memory,pids}.rst.

Groups are named ``agentgym-sbx-<owner pid>-<n>``; :func:`reap_stale` kills the processes of, and
removes, the groups whose owner process is gone (an owner killed by SIGKILL cannot clean up).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import time
from dataclasses import dataclass

__all__ = ["CgroupLayout", "RunCgroup", "detect", "reap_stale", "GROUP_PREFIX"]

GROUP_PREFIX = "agentgym-sbx-"
_GROUP_OWNER = re.compile(re.escape(GROUP_PREFIX) + r"(\d+)-\d+$")
_counter = itertools.count()


@dataclass(frozen=True)
class CgroupLayout:
    """Where this process may create per-run groups.

    Attributes:
        version: 1 or 2.
        parents: controller -> directory under which run groups are created (v2: one directory
            shared by ``memory``, ``pids`` and, when enabled, ``cpu``).
    """

    version: int
    parents: dict[str, str]


def _own_paths() -> dict[str, str]:
    """``controller -> path`` of this process (``""`` key: the v2 group)."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                out[name] = path
    return out


def _mounts() -> list[tuple[str, str, list[str]]]:
    """``(mount point, fs type, options)`` of every cgroup mount."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
                out.append((parts[1], parts[2], parts[3].split(",")))
    return out


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def swap_active() -> bool:
    """Whether any swap area is in use (``/proc/swaps`` lists one below its header)."""
    try:
        with open("/proc/swaps") as f:
            return len(f.read().strip().splitlines()) > 1
    except OSError:
        return False


def detect() -> tuple[CgroupLayout | None, str]:
    """The usable layout, or ``None`` and a sentence saying what is missing.

    v2 is preferred where its controllers are usable; else v1 with writable ``memory`` and
    ``pids`` hierarchies.
    """
    try:
        own = _own_paths()
        mounts = _mounts()
    except OSError as err:
        return None, f"cannot read this process's control groups ({err})"
    problems: list[str] = []
    for point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        group = os.path.join(point, own.get("", "/").lstrip("/"))
        try:
            with open(os.path.join(point, "cgroup.controllers")) as f:
                available = set(f.read().split())
        except OSError:
            available = set()
        if not {"memory", "pids"} <= available:
            problems.append(
                f"cgroup v2 at {point} has controllers {sorted(available) or 'none'}, "
                "not memory and pids"
            )
            continue
        enabled = _enable_v2(group)
        if {"memory", "pids"} <= enabled and _writable_dir(group):
            parents = {c: group for c in ("memory", "pids", "cpu") if c in enabled}
            return CgroupLayout(2, parents), ""
        problems.append(
            f"cgroup v2 group {group} does not delegate memory and pids to new child groups "
            "(write '+memory +pids' to its cgroup.subtree_control, e.g. a systemd unit with "
            "Delegate=yes)"
        )
    v1: dict[str, str] = {}
    for point, fstype, options in mounts:
        if fstype != "cgroup":
            continue
        for controller in ("memory", "pids", "cpu"):
            if controller in options and controller not in v1:
                group = os.path.join(point, own.get(controller, "/").lstrip("/"))
                if _writable_dir(group):
                    v1[controller] = group
                elif controller != "cpu":
                    problems.append(f"cgroup v1 {controller} group {group} is not writable")
    if "memory" in v1 and "pids" in v1:
        return CgroupLayout(1, v1), ""
    for controller in ("memory", "pids"):
        if controller not in v1 and not any(controller in p for p in problems):
            problems.append(f"no {controller} controller is mounted (cgroup v1 or v2)")
    return None, "; ".join(problems)


def _enable_v2(group: str) -> set[str]:
    """Controllers enabled for ``group``'s children, enabling memory/pids/cpu where allowed."""
    path = os.path.join(group, "cgroup.subtree_control")
    try:
        with open(path) as f:
            enabled = set(f.read().split())
    except OSError:
        return set()
    for controller in ("memory", "pids", "cpu"):
        if controller not in enabled:
            with contextlib.suppress(OSError), open(path, "w") as f:
                f.write(f"+{controller}")
                enabled.add(controller)
    return enabled


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_counter(path: str, key: str) -> int:
    """The value of ``key`` in a flat-keyed cgroup file (``key value`` lines); 0 if absent."""
    with contextlib.suppress(OSError, ValueError), open(path) as f:
        for line in f:
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


class RunCgroup:
    """The control group(s) of one run; create with :meth:`create`, end with :meth:`destroy`.

    Args (of :meth:`create`):
        layout: from :func:`detect`.
        memory_bytes: memory of the whole group (RAM, tmpfs pages and kernel memory charged to
            it), bytes; swap is not allowed (``memory.swap.max = 0``, or v1's memsw limit).
        allow_swap: where swap is on and the kernel cannot limit a group's swap, create the group
            all the same (runs may swap past ``memory_bytes``) instead of refusing.
        pids_max: most processes and threads of the group at once.
        cpus: CPU quota in cores (``None``: no quota); applied only where the cpu controller is.

    Raises:
        OSError: a group could not be created or configured, or swap is on and cannot be limited
            (without ``allow_swap``) (:meth:`create`).
    """

    def __init__(self, layout: CgroupLayout, dirs: dict[str, str]):
        self.layout = layout
        self.dirs = dirs

    @classmethod
    def create(
        cls,
        layout: CgroupLayout,
        memory_bytes: int,
        pids_max: int,
        cpus: float | None,
        allow_swap: bool = False,
    ) -> RunCgroup:
        name = f"{GROUP_PREFIX}{os.getpid()}-{next(_counter)}"
        dirs: dict[str, str] = {}
        group = cls(layout, dirs)

        def no_swap_limit(file: str) -> None:
            # Swap on and no way to keep the group out of it: memory_mb would not hold.
            if not allow_swap and swap_active():
                raise OSError(
                    f"swap is on (/proc/swaps) and this kernel cannot limit a group's swap "
                    f"({file} is missing: swap accounting is off); turn swap off, boot with "
                    "swap accounting (swapaccount=1), use the docker back end, or pass "
                    "allow_per_process_limits=True to accept runs that may swap"
                )

        try:
            if layout.version == 2:
                path = os.path.join(layout.parents["memory"], name)
                os.mkdir(path)
                dirs.update({c: path for c in layout.parents})
                _write(os.path.join(path, "memory.max"), str(memory_bytes))
                try:
                    _write(os.path.join(path, "memory.swap.max"), "0")
                except FileNotFoundError:
                    no_swap_limit("memory.swap.max")
                _write(os.path.join(path, "pids.max"), str(pids_max))
                if cpus is not None and "cpu" in layout.parents:
                    _write(os.path.join(path, "cpu.max"), f"{int(cpus * 100_000)} 100000")
            else:
                for controller, parent in layout.parents.items():
                    path = os.path.join(parent, name)
                    os.mkdir(path)
                    dirs[controller] = path
                memory = dirs["memory"]
                _write(os.path.join(memory, "memory.limit_in_bytes"), str(memory_bytes))
                try:
                    _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), str(memory_bytes))
                except (FileNotFoundError, PermissionError):
                    no_swap_limit("memory.memsw.limit_in_bytes")
                with contextlib.suppress(OSError):
                    _write(os.path.join(memory, "memory.swappiness"), "0")
                _write(os.path.join(dirs["pids"], "pids.max"), str(pids_max))
                if cpus is not None and "cpu" in dirs:
                    with contextlib.suppress(OSError):
                        _write(os.path.join(dirs["cpu"], "cpu.cfs_period_us"), "100000")
                        _write(os.path.join(dirs["cpu"], "cpu.cfs_quota_us"), str(int(cpus * 1e5)))
        except OSError:
            group.destroy()
            raise
        return group

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a new process writes ``0`` to, to join every group."""
        return sorted({os.path.join(d, "cgroup.procs") for d in self.dirs.values()})

    def oom_kills(self) -> int:
        """How many processes of the group the kernel's OOM killer ended."""
        memory = self.dirs.get("memory", "")
        if self.layout.version == 2:
            return _read_counter(os.path.join(memory, "memory.events"), "oom_kill")
        return _read_counter(os.path.join(memory, "memory.oom_control"), "oom_kill")

    def pids_refused(self) -> int:
        """How many forks ``pids.max`` refused."""
        return _read_counter(os.path.join(self.dirs.get("pids", ""), "pids.events"), "max")

    def pids(self) -> list[int]:
        out: set[int] = set()
        for procs in self.procs_files():
            with contextlib.suppress(OSError, ValueError), open(procs) as f:
                out.update(int(x) for x in f.read().split())
        return sorted(out)

    def kill_all(self, timeout_s: float = 2.0) -> bool:
        """SIGKILL every process of the group until none is left; ``True`` when empty."""
        return kill_group_dirs(list(self.dirs.values()), timeout_s)

    def destroy(self) -> None:
        """Kill what is left and remove the groups (idempotent)."""
        self.kill_all()
        for path in set(self.dirs.values()):
            _rmdir(path)
        self.dirs.clear()


def kill_group_dirs(dirs: list[str], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        pids: set[int] = set()
        for d in dirs:
            with (
                contextlib.suppress(OSError, ValueError),
                open(os.path.join(d, "cgroup.procs")) as f,
            ):
                pids.update(int(x) for x in f.read().split())
        if not pids:
            return True
        for d in dirs:  # v2 (Linux 5.14+): one write kills the whole group
            with contextlib.suppress(OSError):
                _write(os.path.join(d, "cgroup.kill"), "1")
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def _rmdir(path: str) -> None:
    for _ in range(200):  # a killed process leaves the group a moment after it dies
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.005)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale(layout: CgroupLayout) -> list[str]:
    """Kill the processes of, and remove, run groups whose owner process is gone.

    Returns:
        The group directories removed.
    """
    removed = []
    for parent in set(layout.parents.values()):
        with contextlib.suppress(OSError):
            for name in os.listdir(parent):
                match = _GROUP_OWNER.match(name)
                if match is None or _alive(int(match.group(1))):
                    continue
                path = os.path.join(parent, name)
                kill_group_dirs([path], 2.0)
                _rmdir(path)
                removed.append(path)
    return removed
