#!/usr/bin/env bash
# The whole test suite, as CI runs it: static checks, unit tests under the
# race detector, integration tests on real mounts, and a check that no
# mount is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
step() { printf '\n== %s\n' "$*"; }

# Mounts that were there before this run are not this run's to answer for.
before=$(grep 'fuse.aerfs' /proc/self/mountinfo | awk '{print $5}' | sort || true)

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
$GO test -count=1 -timeout 12m -v ./integration/ 2>&1 | tee /tmp/aerfs-integration.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)' | grep -v '^=== RUN' || true
if ! grep -q '^ok' /tmp/aerfs-integration.log; then
  echo "integration tests failed:"; tail -n 80 /tmp/aerfs-integration.log; exit 1
fi

step "integration tests with a race-enabled daemon (a selection)"
AERFS_RACE=1 $GO test -count=1 -timeout 8m \
  -run 'TestUserCommitsWebRefused|TestCrashDuringGuardedWrites|TestQuarantineApproveReject|TestBurstRollsBackOnlyTheBurstingSession|TestDriftWhileMountedRecordedAndLabelledExternal|TestNamespaceNotServedFromKernelCache|TestPosix' \
  ./integration/

step "leftover mounts"
after=$(grep 'fuse.aerfs' /proc/self/mountinfo | awk '{print $5}' | sort || true)
left=$(comm -13 <(echo "$before") <(echo "$after") | grep . || true)
if [ -n "$left" ]; then
  echo "aerfs mounts left behind by this run:"; echo "$left"; exit 1
fi
echo "no mounts left behind"
