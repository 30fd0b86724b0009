#!/bin/bash
# How to run containers on this machine with podman (and buildah's RUN steps), decided from the host:
#   ENGINE_GLOBAL   podman's global flags: `--runtime runc` unless /sys/fs/cgroup is a pure cgroup2 mount.
#                   crun, bookworm podman's default runtime, stops at "cgroups in hybrid mode not supported,
#                   drop all controllers from cgroupv2" on a cgroup v1 host whose cgroup2 mount has a
#                   controller enabled; runc handles v1, hybrid and v2.
#   ENGINE_ULIMITS  --ulimit flags within the host's own limits. For root podman asks for nofile=1048576
#                   and nproc=4194304; without CAP_SYS_RESOURCE (sandboxes, some CI runners) setting a limit
#                   above the current hard one fails with "setrlimit RLIMIT_NOFILE: Operation not
#                   permitted", and an RLIMIT_NPROC above kernel.pid_max was refused too.
# Sourced by build.sh; run it to print the flags one per line (tests/e2e/test_image.py reads them).
ENGINE_GLOBAL=()
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ] && command -v runc >/dev/null 2>&1; then
  ENGINE_GLOBAL+=(--runtime runc)
fi
_nofile=$(ulimit -Hn)
_nproc=$(ulimit -Hu)
_pid_max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)
[ "$_nofile" = unlimited ] && _nofile=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)
{ [ "$_nproc" = unlimited ] || [ "$_nproc" -gt "$_pid_max" ]; } && _nproc=$_pid_max
ENGINE_ULIMITS=(--ulimit "nofile=$_nofile:$_nofile" --ulimit "nproc=$_nproc:$_nproc")
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  printf 'global %s\n' "${ENGINE_GLOBAL[@]}"
  printf 'run %s\n' "${ENGINE_ULIMITS[@]}"
fi
