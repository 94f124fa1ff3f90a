#!/usr/bin/env bash
# The process back end's launcher under bubblewrap: the first process inside the sandbox of a run.
#
# sandboxes/code/process_backend.py runs it as `bash --noprofile --norc -c <this file's text> sh
# <report fd> <RLIMIT_FSIZE in bytes> <python>` in /work, as the sandbox user (bash: cheaper than
# a second Python; dash cannot name a file descriptor above 9). It runs `python3 -I main.py`,
# then reports "<exit status> <1 if /work, /tmp or /dev/shm is full>" on the report pipe, and
# after a failed run (exit status not 0) also 1 if a file reached RLIMIT_FSIZE (Python ignores
# SIGXFSZ: it sees EFBIG). The host takes only that flag from the report (bash cannot make itself
# undumpable: when the owner is not root, the code could open the pipe through /proc and forge
# it), the exit status from bwrap, which passes this script's on.
rep=$1; fsize=$2; py=$3
exec {err}>&2
# bash's own stderr is /dev/null around the run: no "Killed" notice in the code's stderr.
{ "$py" -I main.py 2>&"$err" {err}>&- {rep}>&- ; } 2>/dev/null
rc=$?
full=0
for v in $(stat -f -c '%a %d' /work /tmp /dev/shm 2>/dev/null); do [ "$v" = 0 ] && full=1; done
if [ "$rc" != 0 ] && [ "$full" = 0 ] && [ -n "$(find /work /tmp /dev/shm -xdev -type f \
    -size +$((fsize - 1))c -print -quit 2>/dev/null)" ]; then full=1; fi
echo "$rc $full" >&"$rep"
exit "$rc"
