# Benchmark targets, included by the main Makefile (include scripts/bench/bench.mk).
# Run as root: FUSE mounts with allow_other, kernel passthrough, drop_caches.
#   make bench        full run (5 runs, 256 MiB fio files, 10,000 files); ~25 min,
#                     then bench-agents
#   make bench-agents wall time per model turn of the real agent clients (Claude
#                     Code, Codex, OpenClaw) on aerfs vs a plain directory, median
#                     of 5 interleaved runs (AERFS_E2E_RUNS); installs the clients
#                     from npm into the e2e cache first; ~10 min
#   make bench-requests  FUSE requests per file of each metadata workload (~30 s)
#   make bench-quick  reduced sizes, 3 runs: checks that everything works
#   make bench-state  mount time, history time and the daemon's memory against
#                     logs of 10k, 100k and 1M records (N/100 sessions), written by
#                     scripts/bench/genlog; ~15 min (STATE_FLAGS='-sizes 10000,100000')
# BENCH_FLAGS passes extra flags, e.g. BENCH_FLAGS='-only fio,meta -keep'.

GO ?= go
BENCH_FLAGS ?=

STATE_FLAGS ?=

.PHONY: bench bench-quick bench-bins bench-requests bench-agents bench-state

bench-bins:
	$(GO) build -o bin/aerfs ./cmd/aerfs
	$(GO) build -o bin/aerfs-loopback ./cmd/aerfs-loopback
	$(GO) build -o bin/aerfs-bench ./scripts/bench

bench: bench-bins
	./bin/aerfs-bench $(BENCH_FLAGS)
	$(MAKE) bench-state
	$(MAKE) bench-agents

bench-state:
	$(GO) build -o bin/aerfs ./cmd/aerfs
	$(GO) build -o bin/aerfs-genlog ./scripts/bench/genlog
	$(GO) build -o bin/aerfs-bench-state ./scripts/bench/state
	./bin/aerfs-bench-state $(STATE_FLAGS)

bench-agents:
	bash e2e/install.sh
	cd e2e && bash -o pipefail -c "$(GO) test -tags e2e -count=1 -timeout 40m -run '^TestTurnTiming\$$' -v . | sed -n '/== wall time per model turn/,\$$p'"

bench-quick: bench-bins
	./bin/aerfs-bench -quick $(BENCH_FLAGS)

# FUSE requests per file of each metadata workload, loopback and aerfs side
# by side (request logs of both servers; about 30 s).
bench-requests: bench-bins
	scripts/bench/requests.sh $(REQUESTS_FLAGS)
