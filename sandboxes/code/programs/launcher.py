"""The process back end's launcher: the first process inside the sandbox of every run.

:mod:`sandboxes.code.process_backend` runs it as ``python3 -I -S -c <this file's text> <payload fd>
<report fd> <python> <watched>``, inside the unshare sandbox (as the sandbox user, cwd /work, a
sized tmpfs; ``<watched>`` is ``/work:/tmp``) or unisolated in a temporary directory (``.``). It
runs under the system Python with no site packages: stdlib only. It reads the files from the
payload pipe (``<u32 name length><u32 size><name><content>``...) and writes them, runs
``python3 -I main.py`` as its child, then writes ``<exit status> <1 if a watched file system is
full, or a file reached RLIMIT_FSIZE>`` on the report pipe (Python ignores SIGXFSZ: it sees
EFBIG); the host takes only that flag from it, the exit status from the process itself. Both
pipes are closed in the child. Its exit ends the sandbox (the PID namespace's processes die
with it).
"""

import ctypes
import os
import resource
import struct
import sys

# Undumpable (PR_SET_DUMPABLE 0): the code runs as this process's user, and could otherwise open
# its report pipe through /proc/<pid>/fd or its memory through /proc/<pid>/mem. The code's own
# exec makes the code dumpable again, as usual.
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
pin, rep, py, watched = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
os.set_inheritable(pin, False)
os.set_inheritable(rep, False)
parts = []
while True:
    chunk = os.read(pin, 1 << 20)
    if not chunk:
        break
    parts.append(chunk)
os.close(pin)
data, i = b"".join(parts), 0
try:
    while i < len(data):
        n, m = struct.unpack_from("<II", data, i)
        name, body = data[i + 8 : i + 8 + n].decode(), data[i + 8 + n : i + 8 + n + m]
        i += 8 + n + m
        if os.path.dirname(name):
            os.makedirs(os.path.dirname(name), exist_ok=True)
        with open(name, "wb") as f:
            f.write(body)
except OSError as error:
    os.write(2, b"sandbox: the files do not fit in /work: %s\n" % str(error).encode())
    os.write(rep, b"1 1\n")
    os._exit(1)
pid = os.fork()
if pid == 0:
    os.execv(py, [py, "-I", "main.py"])
status = os.waitpid(pid, 0)[1]


def full(path):
    try:
        s = os.statvfs(path)
    except OSError:
        return False
    return s.f_bavail == 0 or s.f_favail == 0


budget = [4096]  # files and directories at_fsize may examine, over every watched directory


def at_fsize(path):
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        for top, _, names in os.walk(path):
            budget[0] -= 1
            for name in names:
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                try:
                    if os.lstat(os.path.join(top, name)).st_size >= limit > 0:
                        return True
                except OSError:
                    pass
            if budget[0] < 0:
                return False
    except RecursionError:  # os.walk recurses once a level: a deeper tree is not examined
        return False
    return False


disk = any(full(p) or at_fsize(p) for p in watched.split(":"))
code = os.waitstatus_to_exitcode(status)
code = 128 - code if code < 0 else code
os.write(rep, b"%d %d\n" % (code, disk))
os._exit(code)
