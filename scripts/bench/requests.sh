#!/usr/bin/env bash
# requests.sh — count the FUSE requests each workload costs, on the plain
# go-fuse loopback and on aerfs, side by side.
#
# A FUSE round trip costs the same on any server (the rtt rows of
# `make bench`), so the metadata rows of the benchmark are decided by how
# many requests the kernel sends. This script mounts bin/aerfs-loopback and
# bin/aerfs with request logging, runs small versions of the benchmark's
# metadata workloads through each, and prints the requests per file (or per
# operation), by opcode. See docs/performance.md, "Where metadata time goes".
#
# Usage (as root, from the repository root, after make bench-bins):
#   scripts/bench/requests.sh [-n FILES] [-src DIR] [-keep]
set -euo pipefail

n=200
src=""
keep=0
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n=$2; shift 2 ;;
	-src) src=$2; shift 2 ;;
	-keep) keep=1; shift ;;
	*) echo "usage: $0 [-n FILES] [-src DIR] [-keep]" >&2; exit 2 ;;
	esac
done
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 10 ] || { echo "requests.sh: -n wants a number of files, at least 10 (got \"$n\")" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "requests.sh: run as root (allow_other, drop_caches)" >&2; exit 1; }
for b in bin/aerfs bin/aerfs-loopback; do
	[ -x "$b" ] || { echo "requests.sh: $b not found; run: make bench-bins" >&2; exit 1; }
done
for t in python3 git tar; do
	command -v $t >/dev/null || { echo "requests.sh: $t not found" >&2; exit 1; }
done
if [ -z "$src" ]; then
	src=$(ls -d "$(go env GOMODCACHE)"/golang.org/x/sys@* 2>/dev/null | tail -1 || true)
fi
[ -d "$src" ] || { echo "requests.sh: no source tree; pass -src DIR" >&2; exit 1; }

aerfs=$(realpath bin/aerfs)
loopback=$(realpath bin/aerfs-loopback)
base=$(mktemp -d /var/tmp/aerfs-requests-XXXXXX)
ws=$base/ws lbb=$base/lb-backing lbm=$base/lb
mkdir -p "$ws" "$lbb" "$lbm"
printf '# memory\n' > "$ws/MEMORY.md"
printf '# soul\n' > "$ws/SOUL.md"
pids=()
cleanup() {
	cd /
	for m in "$ws" "$lbm"; do
		mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ $keep = 0 ]; then rm -rf "$base"; else echo "kept $base" >&2; fi
}
trap cleanup EXIT INT TERM

"$aerfs" init --state "$base/state" "$ws" >/dev/null
"$aerfs" mount --state "$base/state" --foreground --debug "$ws" > /dev/null 2> "$base/aerfs.log" &
pids+=($!)
"$loopback" -debug "$lbb" "$lbm" > /dev/null 2> "$base/loopback.log" &
pids+=($!)
for i in $(seq 100); do
	mountpoint -q "$ws" && mountpoint -q "$lbm" && break
	sleep 0.1
done
mountpoint -q "$ws" && mountpoint -q "$lbm" || { echo "requests.sh: mounts did not come up; logs in $base" >&2; keep=1; exit 1; }

tar -cf "$base/src.tar" -C "$(dirname "$src")" "$(basename "$src")"
entries=$(tar -tf "$base/src.tar" | wc -l)

# phase LOG NAME PER CMD...: run CMD, then print the requests LOG gained,
# divided by PER.
phase() {
	local log=$1 name=$2 per=$3
	shift 3
	sleep 0.3 # let asynchronous requests (RELEASE, FORGET) of the last phase land
	local a
	a=$(wc -l < "$log")
	"$@" > /dev/null
	sleep 0.3
	tail -n +"$((a + 1))" "$log" | { grep -ao 'rx [0-9]*: [A-Z_0-9]*' || true; } | awk '{print $3}' | sort | uniq -c | sort -rn |
		awk -v name="$name" -v per="$per" '
		{ t += $1; if (NR <= 6) s = s sprintf(" %s %.2f", $2, $1 / per) }
		END { printf "%-30s %6.2f  %s\n", name, t / per, s }'
}

py_create='import os,sys
d=sys.argv[1]; n=int(sys.argv[2]); b=b"x"*100
for i in range(n):
    fd=os.open(f"{d}/f{i}", os.O_CREAT|os.O_EXCL|os.O_WRONLY, 0o644); os.write(fd,b); os.close(fd)'
py_stat='import os,sys
d=sys.argv[1]; n=int(sys.argv[2])
for i in range(n): os.lstat(f"{d}/f{i}")'
py_unlink='import os,sys
d=sys.argv[1]; n=int(sys.argv[2])
for i in range(n): os.unlink(f"{d}/f{i}")'
py_tree='import os,sys
d=sys.argv[1]; n=int(sys.argv[2])
for j in range(10):
    os.mkdir(f"{d}/d{j}")
    for i in range(n//10 - 1):
        with open(f"{d}/d{j}/f{i}","wb") as f: f.write(b"x"*100)'
py_commit='import os,sys
p=sys.argv[1]; n=int(sys.argv[2])
for i in range(n):
    fd=os.open(p, os.O_WRONLY|os.O_TRUNC); os.write(fd, b"version %d\n" % i); os.close(fd)'
py_refused='import os,sys
p=sys.argv[1]; n=int(sys.argv[2])
for i in range(n):
    try: os.close(os.open(p, os.O_WRONLY))
    except PermissionError: pass
    else: sys.exit("open of " + p + " was not refused")'

cat <<EOF
FUSE requests per file (per operation for the guarded rows), by opcode.
$n small files; a tree of $n entries in 10 directories; $(basename "$src") ($entries entries).
EOF
for target in loopback aerfs; do
	if [ $target = aerfs ]; then root=$ws log=$base/aerfs.log; else root=$lbm log=$base/loopback.log; fi
	d=$root/work
	mkdir -p "$d/meta" "$d/tree" "$d/untar"
	echo
	echo "== $target"
	printf '%-30s %6s  %s\n' workload total "by opcode"
	phase "$log" "create" "$n" python3 -c "$py_create" "$d/meta" "$n"
	phase "$log" "stat (right after create)" "$n" python3 -c "$py_stat" "$d/meta" "$n"
	phase "$log" "unlink" "$n" python3 -c "$py_unlink" "$d/meta" "$n"
	python3 -c "$py_tree" "$d/tree" "$n"
	sleep 1.1
	phase "$log" "ls -lR (1.1 s idle)" "$n" ls -lR "$d/tree"
	sleep 1.1
	phase "$log" "ls -lR, again" "$n" ls -lR "$d/tree"
	sleep 1.1
	phase "$log" "du -s (1.1 s idle)" "$n" du -s "$d/tree"
	phase "$log" "untar" "$entries" tar -xf "$base/src.tar" -C "$d/untar"
	(cd "$d/untar"/* && git init -q && git add -A && git -c user.name=b -c user.email=b@b commit -qm b)
	sync
	echo 2 > /proc/sys/vm/drop_caches # as after the cache timeouts
	phase "$log" "git status (dentries dropped)" "$entries" git -C "$(echo "$d/untar"/*)" status
	sleep 1.1
	phase "$log" "git status, again" "$entries" git -C "$(echo "$d/untar"/*)" status
	if [ $target = aerfs ]; then
		phase "$log" "guarded commit (USER)" 20 "$aerfs" run --workspace "$ws" --principal USER --session req-user -- python3 -c "$py_commit" "$ws/MEMORY.md" 20
		phase "$log" "refused open (WEB)" 20 "$aerfs" run --workspace "$ws" --principal WEB --session req-web -- python3 -c "$py_refused" "$ws/SOUL.md" 20
	fi
done
echo
echo "(the guarded rows include the start of python3 under aerfs run, divided over its 20 operations)"
