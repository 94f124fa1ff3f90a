#!/bin/sh
# The process back end's set-up under `unshare`: builds the sandbox's root, starts the launcher.
#
# sandboxes/code/process_backend.py runs it as `/bin/sh -c <this file's text> sh <root dir>
# <python> <uid or -> <work MiB> <tmp MiB> "<payload fd> <report fd>" <launcher text> <extra>...`
# as root inside new user, PID, network, IPC, UTS and mount namespaces. It mounts a tmpfs root
# with /usr and the extra directories (or links, `link:<path>=<target>`) bound read-only, sized
# tmpfs /work and /tmp, /proc and four device nodes, chroots into it, drops privileges (to <uid>
# unless it is "-") and execs the launcher (programs/launcher.py) with `python3 -I -S -c`.
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin
R="$1"; PY="$2"; REUID="$3"; WORK="$4"; TMP="$5"; FDS="$6"; LAUNCHER="$7"; shift 7
mount -t tmpfs -o size=16m,mode=755 tmpfs "$R"
mkdir -p "$R/usr" "$R/work" "$R/tmp" "$R/proc" "$R/dev" "$R/etc"
mount --bind /usr "$R/usr"; mount -o remount,bind,ro,nosuid,nodev "$R/usr"
for d in "$@"; do
  case "$d" in
    link:*) l="${d#link:}"; ln -s "${l#*=}" "$R${l%%=*}" ;;
    *) mkdir -p "$R$d"; mount --bind "$d" "$R$d"; mount -o remount,bind,ro,nosuid,nodev "$R$d" ;;
  esac
done
[ -f /etc/ld.so.cache ] && cp /etc/ld.so.cache "$R/etc/"
mount -t tmpfs -o "size=${WORK}m,nr_inodes=16384,mode=1777,nosuid,nodev" tmpfs "$R/work"
mount -t tmpfs -o "size=${TMP}m,nr_inodes=16384,mode=1777,nosuid,nodev" tmpfs "$R/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
for n in null zero random urandom; do
  touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"
done
mount -o remount,ro,bind "$R"
# $ids and $FDS are split into words on purpose (several arguments, or none).
if [ "$REUID" = "-" ]; then ids=""; else ids="--reuid=$REUID --regid=$REUID --clear-groups"; fi
# shellcheck disable=SC2086
exec chroot "$R" /usr/bin/setpriv $ids --pdeathsig SIGKILL --inh-caps=-all --bounding-set=-all --no-new-privs \
  /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/work LANG=C.UTF-8 \
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/env -C /work "$PY" -I -S -c "$LAUNCHER" $FDS "$PY" /work:/tmp
