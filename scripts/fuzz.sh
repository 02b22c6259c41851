#!/usr/bin/env bash
# Runs every fuzz target of the module for a bounded time each.
# Usage: scripts/fuzz.sh [DURATION]   (default 20s per target)
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-20s}
for pkg in $(go list ./... | grep -v /integration); do
  for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $f ($t)"
    go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" "$pkg"
  done
done
