#!/usr/bin/env bash
# leftover-mounts.sh DIR — lists the FUSE mounts whose mount point lies
# beneath DIR and exits 1 if there is any. make test gives each run a
# directory of its own (TMPDIR for the Go tests), so only the mounts this run
# made are its business: other FUSE mounts on the machine, aerfs's or not,
# are never looked at.
set -euo pipefail
dir=$(realpath -- "${1:?usage: leftover-mounts.sh DIR}")
# mountinfo: field 5 is the mount point; the file system type follows the
# lone "-" separator.
left=$(awk -v d="$dir/" '
  {
    for (i = 7; i <= NF; i++) if ($i == "-") { fstype = $(i+1); break }
    if ((fstype == "fuse" || fstype ~ /^fuse\./) && index($5 "/", d) == 1) print $5
  }' /proc/self/mountinfo)
if [ -n "$left" ]; then
  echo "$left"
  exit 1
fi
