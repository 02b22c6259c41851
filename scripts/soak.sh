#!/usr/bin/env bash
# make soak: xfstests' fsx and fsstress (built from ../shared/tools into a
# scratch directory) against a real aerfs mount, as root:
#   fsx 20,000 ops on a plain file (every operation the kernel offers,
#   mapped reads and writes included);
#   fsx 5,000 ops on a guarded file (memory/fsx.md), every operation but
#   maps: fsx reads back through a map of its read-write descriptor what it
#   wrote through that descriptor, and a guarded file's map shows the
#   committed version, never a handle's staged bytes (the page cache is one
#   per inode: staged pages would be what every other reader reads;
#   docs/guarded-writes.md, integration TestMmapStagedContentNeverReachesReaders);
#   fsstress 10,000 ops × 4 processes on a plain directory;
#   twenty rounds of SIGKILL during eight guarded writers;
#   a thousand gc rounds beside commits;
#   SOAK_MINUTES (30) of mixed load, the daemon's memory and descriptors
#   bounded after the warm-up.
# Ends with a closing "N passed, N failed" line over the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools.sh
AERFS=${AERFS:-$PWD/bin/aerfs}
go build -o "$AERFS" ./cmd/aerfs
tools=$(build_xfstests_ltp)
run=$(mktemp -d /tmp/aerfs-soak.XXXXXX)
mount_workspace "$run"
logs=$run/logs
mkdir -p "$logs" "$ws/memory" "$ws/stress"

passed=0 failed=0
check() { # check NAME CMD... — runs CMD, counts the result, keeps the output
  local name=$1; shift
  echo "== $name" >&2
  if "$@" >"$logs/$name.log" 2>&1; then
    passed=$((passed + 1)); echo "   ok" >&2
  else
    failed=$((failed + 1)); echo "   FAILED; last lines of $logs/$name.log:" >&2
    tail -n 25 "$logs/$name.log" >&2
  fi
}

check fsx-plain "$tools/fsx" -q -S 1 -N 20000 -P "$logs" "$ws/stress/fsx-plain"
check fsx-guarded "$tools/fsx" -q -S 2 -N 5000 -R -W -P "$logs" "$ws/memory/fsx.md"
check fsstress "$tools/fsstress" -s 3 -n 10000 -p 4 -d "$ws/stress/fsstress"
check verify "$AERFS" verify --state "$state"
# Twenty rounds of SIGKILL during eight guarded writers, each remounted and
# checked (integration TestTxnCrashRounds; make test runs four).
check crash-rounds env AERFS_CRASH_ROUNDS=20 go test -count=1 -timeout 20m -run '^TestTxnCrashRounds$' ./integration/
# A thousand aerfs gc rounds beside commits every 20 ms, no kept version
# pruned (integration TestGCConcurrentWithCommitsKeepsRetainedVersions;
# make test runs a hundred).
check gc-race env AERFS_GC_RACE_ROUNDS=1000 go test -count=1 -timeout 20m -run '^TestGCConcurrentWithCommitsKeepsRetainedVersions$' ./integration/

# SOAK_MINUTES (30) of mixed load on one mount — guarded commits, sessions
# started and ended all the time, refused WEB writes, gc, status, why —
# failing if the daemon's RSS or descriptors grow past their bound after
# the warm-up, or if an acknowledged write is missing (integration
# TestSoakState; the RSS and descriptor curve goes to $logs/state-curve.json).
minutes=${SOAK_MINUTES:-30}
check state env AERFS_SOAK_MINUTES="$minutes" AERFS_SOAK_CURVE="$logs/state-curve.json" \
  go test -count=1 -timeout $((minutes + 15))m -run '^TestSoakState$' -v ./integration/

echo "logs: $logs (removed on success)"
echo "soak: $passed passed, $failed failed"
if [ "$failed" -eq 0 ]; then
  cd / && "$AERFS" unmount "$ws" >/dev/null && trap - EXIT && rm -rf "$run"
fi
[ "$failed" -eq 0 ]
