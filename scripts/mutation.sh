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
exec "$bin/gremlins" unleash ./policy \
  --workers "${WORKERS:-2}" --timeout-coefficient 20 \
  --threshold-efficacy 100 --threshold-mcover 95 "$@"
