# tools.sh — sourced by the POSIX and soak scripts: builds the third-party
# test tools from ../shared/tools into a scratch directory outside the
# repository (they are test tools, never part of aerfs), and mounts a fresh
# aerfs workspace for them.
#
#   AERFS_SCRATCH   where the tools are built (default /var/tmp/aerfs-tools)
#   AERFS_SHARED    the shared directory (default ../shared beside the repository)

scratch=${AERFS_SCRATCH:-/var/tmp/aerfs-tools}
shared=${AERFS_SHARED:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared}

need_packages() { # need_packages CMD:PACKAGE ... — installs what is missing
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# build_pjdfstest — prints the directory holding the pjdfstest binary and its tests/.
build_pjdfstest() {
  local src=$shared/tools/pjdfstest dst=$scratch/pjdfstest
  [ -d "$src" ] || { echo "aerfs: $src is missing" >&2; echo "hint: put the shared directory beside the repository or set AERFS_SHARED" >&2; return 1; }
  if [ ! -x "$dst/pjdfstest" ]; then
    need_packages autoreconf:autoconf automake:automake libtoolize:libtool prove:perl gcc:gcc >&2
    rm -rf "$dst" && mkdir -p "$scratch" && cp -a "$src" "$dst"
    (cd "$dst" && autoreconf -ifs && ./configure && make pjdfstest) >"$scratch/pjdfstest-build.log" 2>&1 ||
      { echo "aerfs: building pjdfstest failed; see $scratch/pjdfstest-build.log" >&2; return 1; }
  fi
  echo "$dst"
}

# build_xfstests_ltp — prints the directory holding fsx and fsstress.
build_xfstests_ltp() {
  local src=$shared/tools/xfstests-ltp dst=$scratch/xfstests-ltp
  [ -d "$src" ] || { echo "aerfs: $src is missing" >&2; echo "hint: put the shared directory beside the repository or set AERFS_SHARED" >&2; return 1; }
  if [ ! -x "$dst/fsx" ] || [ ! -x "$dst/fsstress" ]; then
    need_packages gcc:gcc >&2
    # fsx and fsstress include xfs/xfs.h, xfs/jdm.h and attr headers.
    [ -e /usr/include/xfs/xfs.h ] && [ -e /usr/include/attr/libattr.h ] ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xfslibs-dev libattr1-dev >/dev/null; } >&2
    rm -rf "$dst" && mkdir -p "$scratch" && cp -a "$src" "$dst"
    (cd "$dst" &&
      gcc -O2 -w -I shim -I include -I src -o fsx ltp/fsx.c &&
      gcc -O2 -w -D_GNU_SOURCE -D_LARGEFILE64_SOURCE -I shim -I include -I src -o fsstress ltp/fsstress.c) \
      >"$scratch/xfstests-build.log" 2>&1 ||
      { echo "aerfs: building fsx/fsstress failed; see $scratch/xfstests-build.log" >&2; return 1; }
  fi
  echo "$dst"
}

# mount_workspace DIR — initialises and mounts an aerfs workspace at DIR/ws
# with its state in DIR/state; sets $ws, $state and an EXIT trap that
# unmounts it.
mount_workspace() {
  local dir=$1
  ws=$dir/ws
  state=$dir/state
  mkdir -p "$ws"
  "$AERFS" init --state "$state" "$ws" >/dev/null
  "$AERFS" mount --state "$state" "$ws" >/dev/null
  trap 'cd /; "$AERFS" unmount "$ws" >/dev/null 2>&1 || umount -l "$ws" 2>/dev/null || true' EXIT
}
