# aerfs — build, test, demo. `make test` is what CI runs.
GO      ?= go
BIN     := bin/aerfs
export GOFLAGS ?= -buildvcs=false

.PHONY: all build test unit integration vet demo fuzz posix soak man install uninstall clean e2e mutation test-churn test-unmount-busy test-net-scale test-report-scale

all: build

# The version printed by `aerfs version`: the nearest tag and the commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.revision=$(REVISION)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/aerfs

# vet, formatting, module tidiness, layering, unit tests under the race
# detector, then real mounts (integration), then a leftover-mount check.
test:
	bash scripts/test.sh

# make test while an unrelated FUSE file system is mounted and unmounted
# every 100 ms beside it (scripts/churn.sh): aerfs must find its own mounts
# in a mount table that changes under it, and leave none behind (root).
test-churn:
	bash scripts/churn.sh -- bash scripts/test.sh

# aerfs unmount while another process writes 2 GB to the backing file
# system, with ten sessions of another workspace alive: it returns within
# 5 s and the daemon exits (root, FUSE; too slow for make test).
test-unmount-busy:
	AERFS_BUSY_WRITE_MB=2048 $(GO) test -count=1 -v -run TestUnmountWhileBackingBusy ./integration/

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /integration)

integration:
	CI=$${CI:-} $(GO) test -count=1 -timeout 12m ./integration/

vet:
	$(GO) vet ./...

# 200 sessions × 20 connections at once through their proxies, each
# connection recorded for its own session (make test runs 12 × 20; root).
test-net-scale:
	AERFS_NET_SCALE=1 CI=$${CI:-} $(GO) test -count=1 -timeout 20m -run '^TestNetManySessionsAttribution$$' -v ./integration/

# aerfs report of a 100,000-record log (scripts/bench/genlog, then a real
# mount) rendered in headless Chromium (Debian's chromium) in under 10 s;
# prints the page's size and the times (root, FUSE; about a minute).
test-report-scale:
	AERFS_REPORT_SCALE=1 CI=$${CI:-} $(GO) test -count=1 -timeout 20m -run '^TestReportScale100k$$' -v ./integration/

# The main job: mounts aerfs over a sample workspace and shows attacks
# refused, legitimate work committed and a verified evidence bundle.
demo: build
	bash scripts/demo.sh

# Bounded fuzzing of every parser (FUZZTIME per target, default 20s).
FUZZTIME ?= 20s
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

# Mutation testing of policy/ (gremlins, pinned, installed into a scratch
# GOBIN): every mutant the tests reach is killed, and they reach at least
# 95 % of them. About half an hour on two cores.
mutation:
	bash scripts/mutation.sh

# pjdfstest on a plain directory of a real mount (about 4 minutes, root).
# The suite is built from ../shared/tools into a scratch directory.
posix:
	bash scripts/posix.sh

# fsx on a plain and on a guarded file, fsstress with 4 processes, crash and gc
# rounds, SOAK_MINUTES (30) of mixed load with bounded memory (root).
soak:
	bash scripts/soak.sh

# Man pages for every command, generated from the CLI's own help.
man: build
	$(BIN) man bin/man

# make install [PREFIX=/usr/local] [DESTDIR=...]: the binary, the systemd
# unit, the mount(8) helper (in SBINDIR, where mount looks for
# mount.fuse.aerfs), man pages and shell completions.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
SBINDIR ?= /sbin
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= /etc/systemd/system
install: build man
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
		$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/aerfs
	sed 's|@BINDIR@|$(BINDIR)|g' configs/mount.fuse.aerfs > $(DESTDIR)$(SBINDIR)/mount.fuse.aerfs
	chmod 0755 $(DESTDIR)$(SBINDIR)/mount.fuse.aerfs
	sed 's|@BINDIR@|$(BINDIR)|g' configs/aerfs@.service > $(DESTDIR)$(UNITDIR)/aerfs@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/aerfs@.service
	install -m 0644 bin/man/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 bin/man/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 bin/man/*.8 $(DESTDIR)$(MANDIR)/man8/
	$(BIN) completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/aerfs
	$(BIN) completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_aerfs
	$(BIN) completion fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/aerfs.fish

# make uninstall [PREFIX=…] [DESTDIR=…]: removes what make install put in
# place. Workspaces, their state directories and /etc/aerfs stay: they hold
# the owner's evidence.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/aerfs $(DESTDIR)$(SBINDIR)/mount.fuse.aerfs $(DESTDIR)$(UNITDIR)/aerfs@.service
	rm -f $(DESTDIR)$(MANDIR)/man1/aerfs.1 $(DESTDIR)$(MANDIR)/man1/aerfs-*.1 \
		$(DESTDIR)$(MANDIR)/man5/aerfs-policy.5 $(DESTDIR)$(MANDIR)/man5/aerfs.yaml.5 $(DESTDIR)$(MANDIR)/man8/mount.fuse.aerfs.8
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/aerfs $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_aerfs \
		$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/aerfs.fish

# The real agent clients (Claude Code, Codex, OpenClaw, installed from npm
# into a cached scratch directory) driven by a scripted model on 127.0.0.1,
# each scenario on a real mount (root). Prints the scenario table and the
# wall time per turn on aerfs and on a plain directory.
e2e:
	bash e2e/install.sh
	cd e2e && $(GO) test -tags e2e -count=1 -timeout 40m

clean:
	rm -rf bin

-include scripts/bench/bench.mk
