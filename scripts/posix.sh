#!/usr/bin/env bash
# make posix: pjdfstest (built from ../shared/tools/pjdfstest into a scratch
# directory) on a plain directory of a real aerfs mount, as root. Prints the
# failing tests and a closing "N passed, N failed" line over test cases, and
# exits 1 if any failed. POSIX_NATIVE=1 runs the same suite on the backing
# file system instead, for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/tools.sh
AERFS=${AERFS:-$PWD/bin/aerfs}
go build -o "$AERFS" ./cmd/aerfs
pjd=$(build_pjdfstest)

run=$(mktemp -d /tmp/aerfs-posix.XXXXXX)
if [ "${POSIX_NATIVE:-}" = 1 ]; then
  target=$run/native
  mkdir -p "$target"
else
  mount_workspace "$run"
  target=$ws/posix
  mkdir -p "$target"
fi
echo "pjdfstest on $target" >&2
cd "$target"
log=$run/prove.log
# On the mount the suite runs as the owner's program: in a USER session,
# unconfined (it switches to other uids, which a confined session's user
# namespace does not map). Outside a session, what uids other than the
# owner's write is of untrusted origin (class none), and aerfs refuses to
# make it executable (AU3-exec-none): open/06.t does exactly that as uid
# 65534, 26 of its cases.
session=()
if [ "${POSIX_NATIVE:-}" != 1 ]; then
  session=("$AERFS" run --workspace "$ws" --principal USER --session "posix-$$" --sandbox=off --)
fi
set +e
"${session[@]}" prove -r "$pjd/tests" >"$log" 2>&1
set -e
# prove's summary: "Files=N, Tests=M"; failures in "Failed X/Y subtests".
tests=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\).*/\1/p' "$log" | tail -1)
failed=$(awk '/Failed [0-9]+\/[0-9]+ subtests/ { split($2, a, "/"); n += a[1] } END { print n + 0 }' "$log")
grep -E '^/.*(Wstat|Failed)|Failed tests:' -A1 "$log" | head -n 60 || true
cp "$log" "${TMPDIR:-/tmp}/aerfs-posix-last.log"
echo "prove log: ${TMPDIR:-/tmp}/aerfs-posix-last.log"
if [ -z "$tests" ]; then
  echo "aerfs: prove printed no summary; see the log" >&2
  exit 1
fi
echo "posix: $((tests - failed)) passed, $failed failed"
cd /
[ "$failed" -eq 0 ]
