# kpsim: a kernel-model simulator of Linux kprobe registration on x86-64.
GO ?= go
# Fuzz time per target for `make fuzz`.
FUZZTIME ?= 20s

.PHONY: run test vet staticcheck bench fuzz build clean real-kernel soak test-generations

# The revision every report names (go's own VCS stamp is missing in git
# worktrees and with -buildvcs=false).
KPSIM_REV := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X github.com/kpsim/kpsim/scenarios.vcsRevision=$(KPSIM_REV)

# The main job on the embedded synthetic default image: the batch kprobe
# sample (20,000 probes) upstream vs the series.
run:
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/kpsim run many

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o kpsim ./cmd/kpsim

# vet, staticcheck (pinned as a go.mod tool, fetched through the module
# proxy on a fresh machine) and the race-enabled tests of every package.
test: vet staticcheck
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) tool staticcheck ./...

# Go benchmarks only (benchstat-friendly: run it twice and compare).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

# Every fuzz target for FUZZTIME each. The targets are found in the test
# sources (a package's fuzz targets are its test files' top-level func
# FuzzX), so only packages that have one build a test binary, and each
# such package builds it once (go test -c -fuzz instruments it) for all
# its targets; the binary keeps go test's corpus cache
# (GOCACHE/fuzz/IMPORTPATH) and runs in the package directory, as go test
# does.
fuzz:
	@set -e; bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; cache=$$($(GO) env GOCACHE)/fuzz; \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  pkg=$$($(GO) list -f '{{.ImportPath}}' $$dir); \
	  $(GO) test -c -fuzz=. -o "$$bin/fuzz.test" $$dir; \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$dir/*_test.go | sort -u); do \
	    echo "fuzz $$dir $$t"; \
	    (cd $$dir && "$$bin/fuzz.test" -test.run '^$$' -test.fuzz "^$$t$$" -test.fuzztime $(FUZZTIME) -test.fuzzcachedir "$$cache/$$pkg"); \
	  done; \
	done

# The soak: a seeded random campaign compared step by step between none and
# sampled switch sets (scenarios/soak). The seed is fixed (same steps, same
# sets every run); pass SOAK_SEED=$$(date +%s) for a fresh one (it is printed).
# CI runs the bounded form: make soak SOAK_STEPS=100000.
SOAK_STEPS ?= 1000000
SOAK_SEED ?= 1
soak:
	$(GO) run ./cmd/kpsim soak --steps $(SOAK_STEPS) --seed $(SOAK_SEED)

# A pinned Debian kernel in .cache/kernels/; prints its bzImage's path.
# KVER=6.1 (default: bookworm's 6.1.192, .cache/kernels/vmlinuz-KVER and
# lib/modules/KVER), 6.12 (trixie's 6.12.117) or 7.3 (experimental's
# 7.3~rc7), the later two unpacked as shipped under .cache/kernels/KVER/;
# DBG=1 adds their -dbg vmlinux and System.map (about 1 GB each to
# download). Tests that need a kernel skip when it is absent.
KVER ?= 6.1
DBG ?= 0
real-kernel:
	@if [ "$(KVER)" = 6.1 ]; then \
		if [ "$(DBG)" = 1 ]; then echo "real-kernel: DBG=1 is for KVER=6.12 or 7.3 (the 6.1 tests read the bzImage)" >&2; exit 2; fi; \
		./scripts/fetch-kernel.sh; \
	else DBG=$(DBG) ./scripts/fetch-kernel-gen.sh $(KVER); fi

# The 6.12 and 7.3 checks against the real packages (readelf, objdump,
# System.map, the embedded kallsyms tables, the modules): they fetch about
# 2.5 GB (the -dbg packages) and take minutes, so CI, which has only the
# 6.1 kernel, skips them; run this before changing a loader, the boot
# patching, kallsyms or module code.
test-generations:
	$(MAKE) -s real-kernel KVER=6.12 DBG=1 >/dev/null
	$(MAKE) -s real-kernel KVER=7.3 DBG=1 >/dev/null
	$(GO) test -count=1 ./image/... ./alternative/... ./module/... ./kallsyms/... ./x86/... ./cmd/kpsim/ ./scenarios/

clean:
	rm -f kpsim
