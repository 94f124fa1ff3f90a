"""The seccomp filter of every code back end: all system calls allowed except a few, refused.

Refused with ``EPERM``:

* the kernel key management calls ``add_key``, ``request_key`` and ``keyctl``: key rings are
  kept per user, and every run of the process back end is the same user (``nobody``, or the
  owner's user mapped to root), so a key ring would be a channel from one run to the next;
* ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register``: a large kernel surface that
  no Python program needs, and whose operations bypass the filters of the calls they stand for;
* ``ptrace``, ``process_vm_readv``, ``process_vm_writev`` and ``pidfd_getfd``: the code runs as
  the same user as the program that started it (the docker bootstrap, the process back ends'
  launchers), so it could read that program's memory (the report's nonce), stop it before its
  clean-up, or copy its report pipe, forging a report;
* ``prlimit64`` on any process but the caller itself (a first argument other than 0): it could
  change that program's limits (the docker bootstrap's file-size limit decides the "disk"
  label; a file-descriptor limit of 3 breaks its clean-up). ``setrlimit``/``getrlimit``, and
  ``prlimit64(0, ...)`` which glibc's versions of them call, are allowed.

A process of another ABI than this machine's (32-bit x86 through ``int 0x80``, x32) is killed:
its system call numbers differ, so the filter could not tell what it asked for.

The filter is a classic BPF program (``struct sock_filter`` records, ``linux/filter.h``) built here
by hand, for x86_64 and aarch64. :func:`filter_bytes` gives it as bytes, for bubblewrap's
``--seccomp FD`` and for the docker bootstrap, which installs it in its container before it runs
the code; :func:`installer` gives a callable that installs it in the calling process (between
``fork`` and ``exec``: ``PR_SET_NO_NEW_PRIVS``, then ``PR_SET_SECCOMP``), for ``unshare`` and
the unisolated runs. The filter stays for the process and everything it starts.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from collections.abc import Callable

__all__ = ["DENIED", "filter_bytes", "installer", "supported"]

#: The refused system calls, by name.
DENIED = (
    "add_key",
    "request_key",
    "keyctl",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
)

# The audit architecture (linux/audit.h) and the numbers of the refused calls, per machine.
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,  # AUDIT_ARCH_X86_64
        {"add_key": 248, "request_key": 249, "keyctl": 250}
        | {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
        | {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311}
        | {"pidfd_getfd": 438, "prlimit64": 302},
    ),
    "aarch64": (
        0xC00000B7,  # AUDIT_ARCH_AARCH64
        {"add_key": 217, "request_key": 218, "keyctl": 219}
        | {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
        | {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271}
        | {"pidfd_getfd": 438, "prlimit64": 261},
    ),
}
_X32_BIT = 0x40000000  # x86_64: system call numbers of the x32 ABI carry this bit

# BPF instruction classes and fields (linux/bpf_common.h), seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS: load 32 bits of struct seccomp_data
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000  # | errno in the low 16 bits
_RET_KILL_PROCESS = 0x80000000
# struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }: the low
# 32 bits of args[0] (little-endian on both machines), all of a pid_t
_NR_OFFSET, _ARCH_OFFSET, _ARG0_OFFSET = 0, 4, 16

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def supported() -> bool:
    """Whether this machine's architecture has a filter here (x86_64, aarch64)."""
    return platform.machine() in _ARCHES


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter


def filter_bytes(machine: str | None = None) -> bytes:
    """The filter program for ``machine`` (default: this one's) as ``struct sock_filter`` records.

    Raises:
        RuntimeError: no filter for that architecture.
    """
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise RuntimeError(f"no seccomp filter for the {machine} architecture (x86_64, aarch64)")
    arch, numbers = _ARCHES[machine]
    denied = [numbers[name] for name in DENIED]
    # Layout: [0] load arch, [1] arch test, [2] load nr, [3] x32 test (x86_64), then one test
    # per refused number, then prlimit64's: its number, load args[0], test 0; then the three
    # returns: allow, refuse (EPERM), kill.
    checks = len(denied) + (1 if machine == "x86_64" else 0) + 3
    allow = 3 + checks  # index of the "allow" return
    refuse, kill = allow + 1, allow + 2
    prog = [_op(_LD_W_ABS, _ARCH_OFFSET)]
    prog.append(_op(_JEQ_K, arch, jt=0, jf=kill - 2))  # a jump counts from the next instruction
    prog.append(_op(_LD_W_ABS, _NR_OFFSET))
    if machine == "x86_64":
        prog.append(_op(_JGE_K, _X32_BIT, jt=refuse - len(prog) - 1, jf=0))
    for nr in denied:
        prog.append(_op(_JEQ_K, nr, jt=refuse - len(prog) - 1, jf=0))
    prog.append(_op(_JEQ_K, numbers["prlimit64"], jt=0, jf=allow - len(prog) - 1))
    prog.append(_op(_LD_W_ABS, _ARG0_OFFSET))
    prog.append(_op(_JEQ_K, 0, jt=allow - len(prog) - 1, jf=refuse - len(prog) - 1))
    prog += [
        _op(_RET_K, _RET_ALLOW),
        _op(_RET_K, _RET_ERRNO | errno.EPERM),
        _op(_RET_K, _RET_KILL_PROCESS),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def installer() -> Callable[[], None]:
    """A callable that installs the filter in the process that calls it (safe between ``fork``
    and ``exec``: everything is allocated here, beforehand). It raises ``OSError`` when the kernel
    refuses the filter.

    Raises:
        RuntimeError: no filter for this architecture, or no ``prctl``.
    """
    program = filter_bytes()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError) as err:
        raise RuntimeError("no prctl here: cannot install a seccomp filter") from err
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    pointer = ctypes.addressof(fprog)

    def install() -> None:
        keep = (buffer, fprog)  # noqa: F841 - the program must outlive this call
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, pointer, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")

    return install
