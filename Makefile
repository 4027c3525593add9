# wva — common tasks. `make help` lists them.
SHELL := /usr/bin/env bash
GO ?= go
BIN ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/wva-project/wva/pkg/version.Version=$(VERSION) -X github.com/wva-project/wva/pkg/version.Commit=$(COMMIT)
# Go test flags; CI adds -count=1.
TESTFLAGS ?=
TEST_TIMEOUT ?= 30m
# Tests that call t.Parallel (test/integration's, each on its own control
# plane) run this many at a time: they mostly wait on controllers.
TEST_PARALLEL ?= 4

.PHONY: help build test test-unit test-race test-deps e2e lint fuzz generate verify-generate demo docs bench-report bench-check bench-heldout clean

help: ## List targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## Build bin/wva (static)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/wva ./cmd/wva

test: test-deps ## Run the whole suite (unit + real control plane and Prometheus)
	$(GO) test -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) $(TESTFLAGS) ./...

e2e: test-deps ## Closed-loop rig: control plane + kwok + emulated vLLM fleet + Prometheus + wva processes
	$(GO) test -tags e2e -timeout 30m -parallel 4 $(TESTFLAGS) -v -run 'TestClosedLoop|TestRealIntervals' ./test/e2e/

test-unit: ## Run the tests that need no external binaries
	$(GO) test $(TESTFLAGS) $$($(GO) list ./... | grep -v /test/)

# Packages whose goroutines meet (informer handlers, the engine loop, the
# metrics server, leader election), under the race detector.
RACE_PKGS ?= ./pkg/engine/ ./pkg/provider/ ./pkg/controller/ ./pkg/scalefromzero/ ./pkg/adapter/

test-race: ## Unit tests of the concurrent packages under the race detector (needs cgo)
	CGO_ENABLED=1 $(GO) test -race -timeout 15m $(TESTFLAGS) $(RACE_PKGS)

test-deps: ## Install Prometheus (Debian) and build kube-apiserver/etcd/... into the cache
	hack/install-test-deps.sh

lint: ## go vet and gofmt
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './vendor/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Every parser of outside input has a fuzz target; go test fuzzes one target
# per invocation. Crashers land in the package's testdata/fuzz. The budget is a
# count of executions, not a duration: Go 1.26's coordinator can report its own
# -fuzztime deadline as a failure on a loaded machine (Go issue 75804).
# -vet=off: vetting is `make lint`'s.
FUZZTIME ?= 20000x
FUZZ_TARGETS := FuzzParseQueue:./pkg/eppqueue FuzzParse:./pkg/snapshot FuzzApply:./pkg/config FuzzParseTrace:./pkg/sim/trace

fuzz: ## Fuzz each parser for FUZZTIME (20000 executions)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t#*:}"; \
		$(GO) test -vet=off -run '^$$' -fuzz "^$${t%%:*}\$$" -fuzztime $(FUZZTIME) $${t#*:}; \
	done

generate: ## Regenerate deepcopy, the CRD manifest and the typed client
	hack/update-codegen.sh

verify-generate: ## Fail if generated files are stale
	hack/verify-codegen.sh

demo: ## The main job on its embedded default (no cluster): simulate wva against the other policies
	$(GO) run ./cmd/wva simulate

docs: ## Regenerate the flag tables in docs/ from the commands (test/docs fails when they are stale)
	$(GO) run ./hack/flagdocs

bench-report: ## Regenerate the benchmark tables in README.md and docs/benchmarks.md
	$(GO) run ./hack/benchreport

# BENCHFLAGS=-full simulates even when the tables' stamp says they are current.
BENCHFLAGS ?=

bench-check: ## Fail when the committed benchmark tables differ from a fresh run (quick while their stamp matches)
	$(GO) run ./hack/benchreport -check $(BENCHFLAGS)

bench-heldout: ## Print the planner's goals judged on the held-out workloads
	$(GO) run ./hack/benchreport -heldout

clean:
	rm -rf $(BIN)
