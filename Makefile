# hypernode-scheduler build, test and code generation.
#
# Everything is built from Go modules (the module proxy) into bin/; no step downloads a binary.

SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
KWOK_VERSION ?= v0.8.0
# Integration tests share one apiserver per package; give slow machines room.
TEST_TIMEOUT ?= 25m

.PHONY: all build test test-unit test-integration generate verify clean tools

all: build

## build: every binary of the project, plus the control-plane binaries, into bin/
build: bin/kube-scheduler bin/etcd bin/kube-apiserver bin/kwok

# The project's own binaries are always rebuilt (go build is incremental).
.PHONY: bin/kube-scheduler
bin/kube-scheduler:
	$(GO) build -o $@ ./cmd/kube-scheduler

# etcd and kube-apiserver are tool dependencies of this module (see the `tool` block in
# go.mod), so they are built from the exact versions kubernetes v1.37.1 pins.
bin/etcd: go.mod go.sum
	$(GO) build -o $@ go.etcd.io/etcd/server/v3

bin/kube-apiserver: go.mod go.sum
	$(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

# kwok is its own module with its own dependency graph; go install builds it from the proxy.
bin/kwok:
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)

## test: unit and integration tests (what CI runs)
test: test-unit test-integration

test-unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/)

test-integration:
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/...

## generate: deepcopy, defaults, conversions, clients, CRDs; and the k8s.io replace block
generate:
	./hack/update-codegen.sh

## verify: formatting, vet, and generated code and CRDs up to date
verify:
	./hack/verify.sh

clean:
	rm -rf $(BIN)
