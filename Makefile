# doxlab: the two commands a newcomer runs are 'make demo' and 'make test'.
GO ?= go
export PATH := $(shell $(GO) env GOPATH)/bin:$(PATH)

.PHONY: build peers test demo bench fuzz

build:
	$(GO) build -buildvcs=true -o bin/doxlab ./cmd/doxlab  # record the commit even where GOFLAGS turns it off

peers:
	bash scripts/install-peers.sh

# CI=true turns a missing peer into a failure instead of a skip.
test: peers
	CI=true $(GO) vet ./...
	CI=true $(GO) test -count=1 ./...

demo: peers build
	bash scripts/demo.sh

bench: peers
	$(GO) test ./transport -run '^$$' -bench . -benchtime 3000x
	$(GO) test ./server -run '^$$' -bench ServerQPS -benchtime 20000x
	bash scripts/bench-server.sh

fuzz:
	for f in FuzzReadPrefixed FuzzDecodeDoH FuzzDoHRequest FuzzParseDoHRequest; do \
		$(GO) test ./internal/dnswire -run '^$$' -fuzz "^$$f$$" -fuzztime 30s || exit 1; done
	$(GO) test ./transport -run '^$$' -fuzz FuzzParseURL -fuzztime 30s
	for f in FuzzStreamConn FuzzDoHHandler FuzzDoQQuery; do \
		$(GO) test ./server -run '^$$' -fuzz "^$$f$$" -fuzztime 30s || exit 1; done
	$(GO) test ./overhead -run '^$$' -fuzz FuzzAttribute -fuzztime 30s
