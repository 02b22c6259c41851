# Benchmark targets, included by the main Makefile (include scripts/bench/bench.mk).
# Run as root: FUSE mounts with allow_other, kernel passthrough, drop_caches.
#   make bench        full run (5 runs, 256 MiB fio files, 10,000 files); ~25 min
#   make bench-requests  FUSE requests per file of each metadata workload (~30 s)
#   make bench-quick  reduced sizes, 3 runs: checks that everything works
# BENCH_FLAGS passes extra flags, e.g. BENCH_FLAGS='-only fio,meta -keep'.

GO ?= go
BENCH_FLAGS ?=

.PHONY: bench bench-quick bench-bins bench-requests

bench-bins:
	$(GO) build -o bin/aerfs ./cmd/aerfs
	$(GO) build -o bin/aerfs-loopback ./cmd/aerfs-loopback
	$(GO) build -o bin/aerfs-bench ./scripts/bench

bench: bench-bins
	./bin/aerfs-bench $(BENCH_FLAGS)

bench-quick: bench-bins
	./bin/aerfs-bench -quick $(BENCH_FLAGS)

# FUSE requests per file of each metadata workload, loopback and aerfs side
# by side (request logs of both servers; about 30 s).
bench-requests: bench-bins
	scripts/bench/requests.sh $(REQUESTS_FLAGS)
