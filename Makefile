# doxlab: the two commands a newcomer runs are 'make demo' and 'make test'.
GO ?= go
export PATH := $(shell $(GO) env GOPATH)/bin:$(PATH)

.PHONY: build peers test vet unit race timed e2e demo bench scale-bench fuzz lint check graphs licenses cross release images

build:
	$(GO) build -buildvcs=true -o bin/doxlab ./cmd/doxlab  # record the commit even where GOFLAGS turns it off

peers:
	bash scripts/install-peers.sh

# CI=true turns a missing peer into a failure instead of a skip.
# RACE_PKGS: the concurrent packages, whose tests run under the race
# detector too (scripts/tests.sh). The experiments are timed to tens of
# microseconds, which -race's slowdown would distort; the testbed's own
# tests (its emulator, checks and capture) hold under it.
# RACE_SKIP: quic-go v0.65's http3 client races with its own handshake on
# a 0-RTT request (connection.go handleTransportParameters against
# http3's openControlStream, or its streams map opening a stream; seen
# here in transport, its leak check's 0-RTT included, and in pageload's
# and measure's leak checks), so the tests that send HTTP/3 in 0-RTT run
# without -race only. The same write races DoQ's stream opened in 0-RTT
# (transport/doq.go's OpenStreamSync reading the flow-control limits;
# seen in server's TestTicketKeyFileSurvivesRestart and
# TestResumptionAcrossListeners, whose DoQ 0-RTT is the whole test's
# end), which run without -race too. TestDistributedCampaign runs doxlab
# binaries in the testbed; its in-process twin, TestPlanAndWorkers, is
# what -race checks.
RACE_PKGS = ./server ./transport ./measure ./store ./protocol ./internal/dnswire ./internal/h3ext ./internal/h3server ./pageload ./experiment ./bench ./campaign ./testbed ./internal/stats
RACE_SKIP = TestResumptionAndZeroRTT/doh3|TestResumptionAcrossListeners|TestZeroRTTRejectedIsResent/h3|TestRunAgainstServer|TestDistributedCampaign|TestReplayFollowsTheGraph|TestReplayFollowsAnyGraph|TestLoadsLeaveNothingRunning|TestCoalescedLoads|TestZeroRTTRejectedIsRetried|TestCoalescedLookupRetriedAfterRejected0RTT|TestTicketKeyFileSurvivesRestart|TestTasksLeaveNothingRunning|TestClosedTransportsLeaveNothingRunning/0rtt
# DOXLAB_TESTBED_WAIT: packages and lanes run in parallel, and two of
# them may want the same testbed (web): the second waits for the first.
#
# make test runs its lanes, each its own target, through
# scripts/lanes.sh: every lane runs, each is reported apart, and a failure
# names its lane. unit, race and timed are go test's lanes
# (scripts/tests.sh: every test once, and the race lane's packages' once
# under -race too); e2e runs the built binary as a user does (the
# experiments on the testbed, their reports in Chromium, the README's
# first steps).
#
# The lanes run in three parts at once: unit; the images, cross, lint,
# vet and licenses; race then e2e, once the images lane has ended (e2e
# runs its images; lanes.sh's @). The images come first because e2e
# waits for them; the lanes that compile and check follow them, where
# nothing waits for them (lint, vet and licenses took 40 to 130 s before
# unit, on the longest part), cross first of them: with Go's build cache
# emptied it took 933 s (1139 s of CPU). Two test lanes run at a time at
# most: the tests mostly wait (about half a core per test binary), but
# all three at once overloaded the two cores (the race lane took 387 s,
# not 302 s; in another CI 574 s, not 361). The lanes that compile and
# check (none of them times anything) mostly wait on the disk (cross
# took 30 to 265 s for 20 to 67 s of CPU; lint 3 to 109 s for 2 to 74),
# and the test lanes waited for them; now unit and
# race fill that wait. The timed tests (a bound on time, found by the
# code) run last, alone, in the timed lane: beside the other test lanes
# TestDoxlabEngineBesideChromium's document gap went past its bound in
# two CIs of five, when every lane ran its own timed tests.
#
# The lanes' test binaries share one doxlab binary, built by the first
# test that runs it (testutil.BinDirEnv), in a directory of this run.
test: peers
	@bin=$$(mktemp -d) && export DOXLAB_TEST_BIN_DIR=$$bin && \
		bash scripts/lanes.sh 'unit & images cross lint vet licenses & race e2e@images' timed; \
		s=$$?; rm -rf "$$bin"; exit $$s

# Every dependency's license is compatible with doxlab's Apache-2.0
# (go-licenses, pinned; scripts/licenses.sh says what it reads by hand).
licenses:
	bash scripts/licenses.sh

# The lanes build with -trimpath: Go's build cache keys a package
# compiled with its directory by that directory, so a clone of the same
# commit elsewhere (a CI's fresh checkout) compiled every package of
# doxlab's anew: cross took 234 s, lint 96 s. Without the directory, a
# commit compiled once is cached for every checkout: vet 0 s, lint 2 s,
# cross 16 s in a second clone. (The first build with it compiles the
# dependencies for every platform once: cross took 555 s.) buildinfo's
# test keeps its paths: it finds the source tree through them.
TRIM = -trimpath

vet:
	CI=true $(GO) vet $(TRIM) ./...

# The doxlab a release ships links on every platform, and each operating
# system's packages are vetted with their tests (which type-checks every
# package; the link catches what only compiling does, such as a
# dependency's function without a body on one architecture): the
# Linux-only parts (testbed, page loads, kernel timestamps) compile
# everywhere and say so at run time. Vetting one architecture of an OS
# covers its others. Building every package too took 15 s more of the
# lane's 149 for nothing the vet and the link miss. FreeBSD is linked,
# not vetted: its files are the unix ones darwin's vet reads (no file
# names FreeBSD), and the link type-checks every package doxlab ships
# for it; after a change to the export of a leaf package (buildinfo),
# the lane took 108 s without FreeBSD's vet and 121 s with it, for
# the test files alone.
CROSS_VET = darwin/arm64 windows/amd64
CROSS_BUILD = linux/arm64 darwin/amd64 freebsd/amd64
cross:
	@for p in $(CROSS_VET); do echo "cross: vet and link $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet $(TRIM) ./... && GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build $(TRIM) -o /dev/null ./cmd/doxlab || exit 1; done
	@for p in $(CROSS_BUILD); do echo "cross: link $$p"; GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build $(TRIM) -o /dev/null ./cmd/doxlab || exit 1; done

# go test's lanes (scripts/tests.sh says what each runs).
unit race timed:
	RACE_PKGS='$(RACE_PKGS)' RACE_SKIP='$(RACE_SKIP)' GO='$(GO)' TRIM='$(TRIM)' bash scripts/tests.sh $@

e2e:
	CI=true DOXLAB_TESTBED_WAIT=8m $(GO) test -count=1 -timeout 30m ./test/e2e

# golangci-lint, pinned; built from the module proxy once.
GOLANGCI_LINT_VERSION ?= v2.15.0
lint:
	@golangci-lint version 2>/dev/null | grep -q "$(GOLANGCI_LINT_VERSION:v%=%)" || \
		$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	GOFLAGS='$(GOFLAGS) $(TRIM)' golangci-lint run ./...

# A laptop's check: vet, lint and the tests that need neither root nor
# peers (-short; tests needing them skip without CI=true).
check: lint
	$(GO) vet ./...
	$(GO) test -short -count=1 ./...

# The images, doxlab and doxlab-chromium, built from scratch with buildah
# (no daemon, no registry) into dist/images; the e2e lane runs each one's
# worker (scripts/images.sh).
images:
	bash scripts/images.sh

# The release archives for six platforms, checksums and SBOMs in dist/
# (scripts/release.sh: GoReleaser and syft, pinned).
release:
	bash scripts/release.sh

demo: peers build
	bash scripts/demo.sh

bench: peers
	$(GO) test ./transport -run '^$$' -bench . -benchtime 3000x
	$(GO) test ./server -run '^$$' -bench ServerQPS -benchtime 20000x
	bash scripts/bench-server.sh

# report and export on stores of 100k, 1M and 10M DNS samples, SQLite and
# PostgreSQL, beside DuckDB: prints time and peak RSS (docs/store.md).
# Needs root (the seed is measured on the testbed) and ~45 GB of disk.
scale-bench: peers
	bash scripts/scale-bench.sh

# The corpus pages' dependency graphs, recaptured from Chromium (corpus/graphs).
graphs:
	$(GO) run ./corpus/internal/gengraphs corpus/graphs

fuzz:
	for f in FuzzReadPrefixed FuzzDecodeDoH FuzzDoHRequest FuzzParseDoHRequest FuzzDNSStream; do \
		$(GO) test ./internal/dnswire -run '^$$' -fuzz "^$$f$$" -fuzztime 30s || exit 1; done
	$(GO) test ./internal/h3ext -run '^$$' -fuzz FuzzOriginStream -fuzztime 30s
	$(GO) test ./internal/h3server -run '^$$' -fuzz FuzzRequestHeaders -fuzztime 30s
	$(GO) test ./transport -run '^$$' -fuzz FuzzParseURL -fuzztime 30s
	$(GO) test ./bench -run '^$$' -fuzz FuzzReadH3Response -fuzztime 30s
	$(GO) test ./probe -run '^$$' -fuzz FuzzParseVN -fuzztime 30s
	for f in FuzzStreamConn FuzzDoHHandler FuzzDoH2Conn FuzzDoQQuery FuzzLoadConfig; do \
		$(GO) test ./server -run '^$$' -fuzz "^$$f$$" -fuzztime 30s || exit 1; done
	for f in FuzzAttribute FuzzLabels; do \
		$(GO) test ./overhead -run '^$$' -fuzz "^$$f$$" -fuzztime 30s || exit 1; done
	$(GO) test ./internal/specfile -run '^$$' -fuzz FuzzDecode -fuzztime 30s
	$(GO) test ./store -run '^$$' -fuzz FuzzDatasetSamplesFile -fuzztime 30s
	$(GO) test ./store -run '^$$' -fuzz FuzzBrief -fuzztime 30s
	$(GO) test ./store -run '^$$' -fuzz FuzzDatasetLine -fuzztime 30s
	$(GO) test ./store -run '^$$' -fuzz FuzzDecodeBlock -fuzztime 30s
	$(GO) test ./store -run '^$$' -fuzz FuzzUnpackRaw -fuzztime 30s -fuzzminimizetime 5s
	$(GO) test ./figure -run '^$$' -fuzz FuzzTicks -fuzztime 30s
	$(GO) test ./internal/stats -run '^$$' -fuzz FuzzDistUnmarshal -fuzztime 30s -fuzzminimizetime 5s
	$(GO) test ./internal/blocklist -run '^$$' -fuzz FuzzPrefixes -fuzztime 30s
	$(GO) test ./experiment/internal/pages -run '^$$' -fuzz FuzzDecodeForAnalysis -fuzztime 30s -fuzzminimizetime 5s
	for f in FuzzParseTrace FuzzConvertThroughput; do \
		$(GO) test ./testbed -run '^$$' -fuzz "^$$f$$" -fuzztime 30s || exit 1; done
	$(GO) test ./measure -run '^$$' -fuzz FuzzLoadCampaign -fuzztime 30s -fuzzminimizetime 5s
	$(GO) test ./internal/odoh -run '^$$' -fuzz FuzzOpen -fuzztime 30s
	$(GO) test ./internal/ech -run '^$$' -fuzz FuzzParse -fuzztime 30s
	for f in FuzzFromHTML FuzzParseGraph; do \
		$(GO) test ./pageload -run '^$$' -fuzz "^$$f$$" -fuzztime 30s || exit 1; done
