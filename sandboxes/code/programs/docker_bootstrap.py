"""The docker back end's bootstrap: the program that every run starts, inside a sandbox container.

:mod:`sandboxes.code.docker_backend` execs it as ``python3 -I -c <this file's text>`` in a pooled
container, as the sandbox user (uid 1000), under the image's own Python: so it is stdlib-only.
It reads ``<length>\n<json>`` (the files, base64 stdin and a nonce) from its standard input,
writes the files into /work, runs ``python3 -I main.py`` with the output going straight to the
exec's streams, then kills every other process of its user, empties /work, /tmp and /dev/shm,
removes the run's IPC state and checks that no socket is left (/proc/net), so that the next run
in the container starts clean. Its last bytes on stderr are the report the host strips
(``_REPORT`` there): the nonce, whether the container's OOM-kill and refused-fork counts rose,
whether a writable mount filled, whether the clean-up removed everything (else the host discards
the container) and the two counts. Its exit status is the code's own.

Never run it outside a container: it kills every process of its user (``kill(-1, SIGKILL)``).
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

n = int(sys.stdin.buffer.readline())
msg = json.loads(sys.stdin.buffer.read(n))


def deny_calls(program):
    # The host's seccomp filter (sandboxes/code/seccomp.py: keyrings and io_uring refused), on
    # top of Docker's own profile: installed on this process, so the code inherits it.
    import ctypes

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buf = ctypes.create_string_buffer(program, len(program))
    fprog = Fprog(len(program) // 8, ctypes.addressof(buf))
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    # PR_SET_NO_NEW_PRIVS (already set: --security-opt no-new-privileges), PR_SET_SECCOMP, then
    # PR_SET_DUMPABLE 0: the code (same user) can neither read this process's memory (the
    # report's nonce) through /proc/<pid>/mem nor write its /proc files; ptrace is refused
    # by the filter as well. The code's own exec makes it dumpable again, as usual.
    steps = (
        ("install the seccomp filter", (38, 1, 0, 0, 0)),
        ("install the seccomp filter", (22, 2, ctypes.byref(fprog), 0, 0)),
        ("make the bootstrap undumpable", (4, 0, 0, 0, 0)),
    )
    for what, args in steps:
        if prctl(*args) != 0:
            sys.stderr.write(f"sandbox: cannot {what} (errno {ctypes.get_errno()})\n")
            sys.stderr.flush()
            os._exit(1)  # before any file is written: nothing ran


deny_calls(base64.b64decode(msg["seccomp"]))


def counter(path, key):
    try:
        with open(path) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def counters():
    return (
        counter("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")
        + counter("/sys/fs/cgroup/memory.events", "oom_kill"),
        counter("/sys/fs/cgroup/pids/pids.events", "max")
        + counter("/sys/fs/cgroup/pids.events", "max"),
    )


before = counters()
# read before the code runs: the code runs as this user (though seccomp refuses it prlimit64 on
# this process, the limit that decides the "disk" label is never read back from it)
fsize = __import__("resource").getrlimit(__import__("resource").RLIMIT_FSIZE)[0]
disk = False
try:
    for name, data in msg["files"].items():
        path = os.path.join("/work", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
except OSError as error:
    sys.stderr.write(f"sandbox: the files do not fit in /work: {error}\n")
    disk = True
env = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/work",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
code = 1
if not disk:
    # The feeder thread starts before the code does: the container's process limit counts
    # threads, and a fork bomb can reach it before a thread started after the child could.
    # After the child starts, this process makes no thread or process (nothing it could refuse).
    stdin_r, stdin_w = os.pipe()
    stdin_data = base64.b64decode(msg["stdin"])

    def feed():
        try:
            with open(stdin_w, "wb") as f:
                f.write(stdin_data)
        except OSError:
            pass

    threading.Thread(target=feed, daemon=True).start()
    p = subprocess.Popen(
        [sys.executable, "-I", "main.py"],
        cwd="/work",
        env=env,
        stdin=stdin_r,
        start_new_session=True,
    )
    os.close(stdin_r)
    code = p.wait()


def others():
    # processes of this user other than this one, alive or a zombie leader with live threads
    # (a leader whose main thread ended alone reads "Z" while its other threads run on)
    me, uid, found = os.getpid(), os.getuid(), []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except FileNotFoundError:  # gone
            continue
        except OSError:  # unreadable: counted as alive (then the container is not reused)
            found.append(pid)
            continue
        zombie = fields["State"].strip().startswith("Z") and fields["Threads"].strip() == "1"
        if int(fields["Uid"].split()[0]) == uid and not zombie:
            found.append(pid)
    return found


clean = False
for _ in range(200):
    try:  # first unconditionally: whatever the look below could miss is gone too
        os.kill(-1, signal.SIGKILL)  # every process this user may signal, except PID 1 and itself
    except ProcessLookupError:
        pass
    if not others():
        clean = True
        break
    time.sleep(0.01)


def empty(d):
    # whether d filled or a file in it reached the file-size limit; then everything in d goes
    full = False
    try:
        st = os.statvfs(d)
        full = st.f_bavail == 0 or st.f_favail == 0
    except OSError:
        pass
    budget = 4096
    for top, dirs, names in os.walk(d):
        for name in dirs:  # one the code made unreadable (chmod 0) is opened before the walk enters
            path = os.path.join(top, name)
            try:
                if not os.path.islink(path):
                    os.chmod(path, 0o700)
            except OSError:
                pass
        for name in names[:budget]:
            try:
                full = full or 0 < fsize <= os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
        budget -= len(names)
        if budget <= 0:
            break
    removed = True
    for name in os.listdir(d):
        path = os.path.join(d, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            removed = False
    return full, removed


# Sockets outlive their processes in the container's network namespace (TCP's TIME_WAIT holds a
# port for 60 s, and /proc/net shows the run's ports and peers): with any left, it is not reused.
for name in ("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6", "icmp", "icmp6"):
    try:
        with open("/proc/net/" + name) as f:
            if len(f.read().splitlines()) > 1:  # a header line, then one line a socket
                clean = False
    except FileNotFoundError:  # no IPv6 in this kernel
        pass
    except OSError:
        clean = False

for d in ("/work", "/tmp", "/dev/shm"):
    try:
        full, removed = empty(d)
    except (RecursionError, OSError):  # a tree too deep to walk: the container is discarded
        full, removed = False, False
    disk, clean = disk or full, clean and removed


# IPC state: System V shared memory, semaphores and message queues of this container's IPC
# namespace, and POSIX message queues, so that the next run starts without them.
def sysv_ids():
    out = []
    for kind in ("shm", "sem", "msg"):
        try:
            with open("/proc/sysvipc/" + kind) as f:
                out += [(kind, int(line.split()[1])) for line in f.read().splitlines()[1:]]
        except (OSError, ValueError, IndexError):
            pass
    return out


left = sysv_ids()
if left:  # ctypes only when there is something to remove
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for kind, ident in left:
        # IPC_RMID (shmctl/msgctl: cmd 0; semctl: semnum 0, cmd 0)
        getattr(libc, kind + "ctl")(ident, 0, 0)
try:
    for name in os.listdir("/dev/mqueue"):
        try:
            os.unlink(os.path.join("/dev/mqueue", name))
        except OSError:
            clean = False
except FileNotFoundError:
    pass
if left and sysv_ids():
    clean = False
after = counters()
code = 128 - code if code < 0 else code
disk = disk or code == 128 + signal.SIGXFSZ
sys.stdout.flush()
sys.stderr.flush()
oom, pids = after[0] > before[0], after[1] > before[1]
report = (
    f"\x1eagentgym:{msg['nonce']}:{oom:d}:{pids:d}:{disk:d}:{clean:d}:{after[0]:d}:{after[1]:d}\x1e"
)
os.write(2, report.encode())
os._exit(code)
