"""File operations without a shell command, run by the integration tests
inside aerfs sessions. Each subcommand does one system call (or the
shortest sequence that reaches it) and exits 1 with the OS error when the
call fails, so the test sees the refusal where the kernel reports it.

    ops.py truncate PATH N          truncate(2) by path
    ops.py ftruncate PATH N         open O_WRONLY, ftruncate(2)
    ops.py fallocate PATH EXTRA     open O_RDWR, posix_fallocate to size+EXTRA
    ops.py cfr SRC DST N            copy_file_range(2) N bytes to DST offset 0
    ops.py rename2 SRC DST FLAG     renameat2(2), FLAG exchange or noreplace
    ops.py setxattr PATH NAME VAL   setxattr(2)
    ops.py removexattr PATH NAME    removexattr(2)
    ops.py getxattr PATH NAME       print the value
    ops.py mmap PATH DATA           open r+, MAP_SHARED write DATA at 0, msync
    ops.py write PATH DATA          open(PATH, 'w') and write DATA
    ops.py corpus JSONL TARGET      write each payload to TARGET, one JSON
                                    line per payload: {"i", "ok", "err"}
"""
import ctypes
import json
import mmap
import os
import sys

AT_FDCWD = -100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def renameat2(src, dst, flag):
    libc = ctypes.CDLL(None, use_errno=True)
    f = {"exchange": RENAME_EXCHANGE, "noreplace": RENAME_NOREPLACE}[flag]
    if libc.renameat2(AT_FDCWD, src.encode(), AT_FDCWD, dst.encode(), f) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def corpus(jsonl, target):
    with open(jsonl, encoding="utf-8") as f:
        rows = [json.loads(l) for l in f if l.strip()]
    i = 0
    for row in rows:
        if row["label"] != 1:
            continue
        out = {"i": i, "ok": True, "err": ""}
        try:
            # One open, write, close per payload: the commit (or the
            # refusal) happens at close.
            fd = os.open(target, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
            try:
                os.write(fd, row["text"].encode("utf-8"))
            finally:
                os.close(fd)
        except OSError as e:
            out["ok"], out["err"] = False, e.strerror or str(e)
        print(json.dumps(out), flush=True)
        i += 1


def main(a):
    op = a[0]
    if op == "truncate":
        os.truncate(a[1], int(a[2]))
    elif op == "ftruncate":
        fd = os.open(a[1], os.O_WRONLY)
        try:
            os.ftruncate(fd, int(a[2]))
        finally:
            os.close(fd)
    elif op == "fallocate":
        fd = os.open(a[1], os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, os.fstat(fd).st_size + int(a[2]))
        finally:
            os.close(fd)
    elif op == "cfr":
        s = os.open(a[1], os.O_RDONLY)
        d = os.open(a[2], os.O_RDWR)
        try:
            n = os.copy_file_range(s, d, int(a[3]), 0, 0)
            if n != int(a[3]):
                raise OSError(0, "short copy_file_range: %d" % n)
        finally:
            os.close(s)
            os.close(d)
    elif op == "rename2":
        renameat2(a[1], a[2], a[3])
    elif op == "setxattr":
        os.setxattr(a[1], a[2], a[3].encode())
    elif op == "removexattr":
        os.removexattr(a[1], a[2])
    elif op == "getxattr":
        sys.stdout.write(os.getxattr(a[1], a[2]).decode())
    elif op == "mmap":
        data = a[2].encode()
        with open(a[1], "r+b") as f:
            m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE)
            m[0:len(data)] = data
            m.flush()
            m.close()
    elif op == "write":
        with open(a[1], "w") as f:
            f.write(a[2])
    elif op == "corpus":
        corpus(a[1], a[2])
    else:
        raise SystemExit("ops.py: unknown op " + op)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except OSError as e:
        sys.stderr.write("ops.py %s: %s\n" % (sys.argv[1], e))
        sys.exit(1)
