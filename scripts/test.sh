#!/usr/bin/env bash
# The whole test suite, as CI runs it: static checks, unit tests under the
# race detector, integration tests on real mounts, and a check that no
# mount is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
step() { printf '\n== %s\n' "$*"; }

# Everything this run makes lives under a directory of its own: the Go
# tests' temporary directories (and so every workspace they mount) and the
# logs. The leftover check at the end looks only there, so FUSE mounts that
# belong to anything else on the machine are never this run's business.
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/aerfs-test.XXXXXX")
# Readable by all: the confinement tests run aerfs as an unprivileged owner.
chmod 0755 "$run_dir"
export TMPDIR=$run_dir
log=$run_dir/integration.log
echo "test run directory: $run_dir"

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
$GO vet ./...

step "go mod tidy"
$GO mod tidy -diff

step "unit tests (race)"
$GO test -race -count=1 $($GO list ./... | grep -v /integration)

step "integration tests (real mounts)"
$GO test -count=1 -timeout 12m -v ./integration/ 2>&1 | tee "$log" | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)' | grep -v '^=== RUN' || true
if ! grep -q '^ok' "$log"; then
  echo "integration tests failed (whole log: $log):"; tail -n 80 "$log"; exit 1
fi

step "integration tests with a race-enabled daemon (a selection)"
AERFS_RACE=1 $GO test -count=1 -timeout 8m \
  -run 'TestUserCommitsWebRefused|TestCrashDuringGuardedWrites|TestQuarantineApproveReject|TestBurstRollsBackOnlyTheBurstingSession|TestDriftWhileMountedRecordedAndLabelledExternal|TestNamespaceNotServedFromKernelCache|TestPosix|TestNetManySessionsAttribution' \
  ./integration/

step "leftover mounts"
if ! left=$(bash scripts/leftover-mounts.sh "$run_dir"); then
  echo "mounts left behind by this run:"; echo "$left"; exit 1
fi
echo "no mounts left behind"
# The logs stay for a look when something failed; a clean run leaves nothing.
rm -rf "$run_dir"
