#!/usr/bin/env bash
# churn.sh [--period SECONDS] -- COMMAND [ARGS...]
#
# Runs COMMAND while a background loop mounts and unmounts an unrelated
# FUSE file system (the go-fuse loopback of cmd/aerfs-loopback) over and
# over: mounted for PERIOD, unmounted for PERIOD (default 0.1 s). aerfs
# must find its own mounts in a mount table that changes under it (make
# test-churn runs make test this way). Exits with COMMAND's status, after
# checking that the loop left no mount behind. Root (FUSE).
set -euo pipefail
cd "$(dirname "$0")/.."
period=0.1
while [ $# -gt 0 ]; do
  case $1 in
    --period) period=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: churn.sh [--period SECONDS] -- COMMAND [ARGS...]" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: churn.sh [--period SECONDS] -- COMMAND [ARGS...]" >&2; exit 2; }

dir=$(mktemp -d "/tmp/aerfs-churn.XXXXXX")
mkdir -p "$dir/back" "$dir/mnt"
echo "churn: hello" > "$dir/back/file"
${GO:-go} build -o "$dir/loopback" ./cmd/aerfs-loopback

stop=$dir/stop
churn() {
  local n=0 pid
  while [ ! -e "$stop" ]; do
    "$dir/loopback" "$dir/back" "$dir/mnt" > "$dir/ready" 2>> "$dir/loopback.log" &
    pid=$!
    for _ in $(seq 100); do
      grep -q ready "$dir/ready" 2>/dev/null && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.01
    done
    sleep "$period"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    : > "$dir/ready"
    n=$((n + 1))
    sleep "$period"
  done
  echo "$n" > "$dir/cycles"
}

churn &
loop=$!
cleanup() {
  touch "$stop"
  wait "$loop" 2>/dev/null || true
  # Never leave the churn mount behind, whatever happened.
  if grep -q " $dir/mnt " /proc/self/mountinfo; then
    umount -l "$dir/mnt" 2>/dev/null || true
  fi
}
trap cleanup EXIT

status=0
"$@" || status=$?
cleanup
trap - EXIT
echo "churn: $(cat "$dir/cycles" 2>/dev/null || echo 0) mount/unmount cycles of $dir/mnt beside: $*"
if grep -q " $dir/mnt " /proc/self/mountinfo; then
  echo "churn: the loop left its mount behind" >&2
  status=1
fi
rm -rf "$dir"
exit $status
