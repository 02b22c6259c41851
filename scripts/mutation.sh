#!/usr/bin/env bash
# Mutation testing of policy/, the decision core: gremlins changes each
# comparison, negation and arithmetic operator in turn and runs the
# package's tests against the mutant. Every mutant the tests reach must be
# killed (efficacy 100 %) and the tests must reach at least 95 % of them
# (mutator coverage). The pinned gremlins is installed into a scratch
# GOBIN, never into the repository or the user's Go bin directory.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=v0.6.0
bin=${AERFS_TOOLS:-${TMPDIR:-/tmp}/aerfs-tools}/gremlins-$version
if [ ! -x "$bin/gremlins" ]; then
  echo "installing gremlins $version into $bin"
  GOBIN=$bin GOFLAGS= $GO install "github.com/go-gremlins/gremlins/cmd/gremlins@$version"
fi
# gremlins times each mutant's tests against the unmutated run it starts
# with: a cached result would make that a few milliseconds and time every
# mutant out. A mutant may take twenty times as long before it counts as
# timed out: on a loaded machine the exhaustive check slows.
$GO clean -testcache
log=$(mktemp "${TMPDIR:-/tmp}/aerfs-mutation.XXXXXX")
trap 'rm -f "$log"' EXIT
"$bin/gremlins" unleash ./policy \
  --workers "${WORKERS:-2}" --timeout-coefficient 20 "$@" | tee "$log"
# gremlins v0.6.0 exits 0 whatever its --threshold flags say: its summary
# lines decide here.
efficacy=$(sed -n 's/^Test efficacy: \([0-9.]*\)%.*/\1/p' "$log")
coverage=$(sed -n 's/^Mutator coverage: \([0-9.]*\)%.*/\1/p' "$log")
if [ -z "$efficacy" ] || [ -z "$coverage" ]; then
  echo "mutation: gremlins printed no summary"; exit 1
fi
if ! awk -v e="$efficacy" -v c="$coverage" 'BEGIN { exit !(e >= 100 && c >= 95) }'; then
  echo "mutation: efficacy $efficacy % (want 100), mutator coverage $coverage % (want at least 95); survivors:"
  grep -E 'LIVED|TIMED OUT' "$log" || true
  exit 1
fi
echo "mutation: efficacy $efficacy %, mutator coverage $coverage %"
