# hypernode-scheduler build, test and code generation.
#
# Everything is built from Go modules (the module proxy) into bin/; no step downloads a binary.

SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
KWOK_VERSION ?= v0.8.0
STATICCHECK_VERSION ?= v0.8.2
# Integration tests share one apiserver per package; give slow machines room.
TEST_TIMEOUT ?= 25m

.PHONY: all build test test-unit test-integration test-e2e test-bench-short bench bench-faults bench-instructions demo local-up generate verify clean tools

all: build

## build: every binary of the project, plus the control-plane binaries and the tools, into bin/
build: bin/kube-scheduler bin/hypernode-controller bin/kubectl-hypernode bin/etcd bin/kube-apiserver bin/kube-controller-manager bin/kwok bin/kubectl bin/mpi-operator bin/mpijob-crd.yaml bin/training-operator bin/pytorchjob-crd.yaml bin/helm

# What the demo starts (pkg/localcluster): nothing else is built for it.
DEMO_BINS := bin/kube-scheduler bin/hypernode-controller bin/etcd bin/kube-apiserver bin/kube-controller-manager bin/kwok

# The project's own binaries are always rebuilt (go build is incremental).
.PHONY: bin/kube-scheduler bin/hypernode-controller bin/kubectl-hypernode
bin/kube-scheduler:
	$(GO) build -o $@ ./cmd/kube-scheduler

bin/hypernode-controller:
	$(GO) build -o $@ ./cmd/hypernode-controller

bin/kubectl-hypernode:
	$(GO) build -o $@ ./cmd/kubectl-hypernode

# etcd, kube-apiserver and kube-controller-manager are tool dependencies of this module (see the `tool` block in
# go.mod), so they are built from the exact versions kubernetes v1.37.1 pins.
bin/etcd: go.mod go.sum
	$(GO) build -o $@ go.etcd.io/etcd/server/v3

bin/kube-apiserver: go.mod go.sum
	$(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

# The local control plane runs only the Job controller of kube-controller-manager, so that the
# examples can be real Jobs.
bin/kube-controller-manager: go.mod go.sum
	$(GO) build -o $@ k8s.io/kubernetes/cmd/kube-controller-manager

# kubectl (a tool dependency too) runs the commands of docs/troubleshooting.md in the e2e tests,
# and `kubectl hypernode` finds bin/kubectl-hypernode next to it on the PATH.
bin/kubectl: go.mod go.sum
	$(GO) build -o $@ k8s.io/kubernetes/cmd/kubectl

# kwok is its own module with its own dependency graph; go install builds it from the proxy.
bin/kwok:
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)

# Kubeflow's mpi-operator and its MPIJob CRD, from the module pinned in
# hack/tools/mpi-operator/go.mod (a tool module of its own, so that its dependency graph stays
# apart; `go install ...@version` cannot be used: the module proxy refuses the version list it
# reads for deprecation notices). The e2e test lets this real workload controller create a gang.
MPI_OPERATOR_MODULE := $(CURDIR)/hack/tools/mpi-operator
bin/mpi-operator: $(MPI_OPERATOR_MODULE)/go.mod $(MPI_OPERATOR_MODULE)/go.sum
	cd $(MPI_OPERATOR_MODULE) && $(GO) build -o $(BIN)/mpi-operator github.com/kubeflow/mpi-operator/cmd/mpi-operator

# Kubeflow's training-operator (v1: PyTorchJob) and its PyTorchJob CRD, from the module pinned
# in hack/tools/training-operator/go.mod, a tool module of its own like mpi-operator's: the
# e2e test compares the gang kubectl hypernode plan derives with the one it creates.
TRAINING_OPERATOR_MODULE := $(CURDIR)/hack/tools/training-operator
bin/training-operator: $(TRAINING_OPERATOR_MODULE)/go.mod $(TRAINING_OPERATOR_MODULE)/go.sum
	cd $(TRAINING_OPERATOR_MODULE) && $(GO) build -o $(BIN)/training-operator github.com/kubeflow/training-operator/cmd/training-operator.v1

bin/pytorchjob-crd.yaml: $(TRAINING_OPERATOR_MODULE)/go.mod
	@mkdir -p $(BIN)
	dir=$$(cd $(TRAINING_OPERATOR_MODULE) && $(GO) list -m -f '{{.Dir}}' github.com/kubeflow/training-operator) && \
		cp "$$dir/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" $@ && chmod u+w $@

# helm, for the chart's tests (charts/hypernode-scheduler), from the module pinned in
# hack/tools/helm/go.mod: a tool module of its own, as helm brings its own k8s.io versions.
HELM_MODULE := $(CURDIR)/hack/tools/helm
bin/helm: $(HELM_MODULE)/go.mod $(HELM_MODULE)/go.sum
	cd $(HELM_MODULE) && $(GO) build -o $(BIN)/helm helm.sh/helm/v4/cmd/helm

bin/mpijob-crd.yaml: $(MPI_OPERATOR_MODULE)/go.mod
	@mkdir -p $(BIN)
	dir=$$(cd $(MPI_OPERATOR_MODULE) && $(GO) list -m -f '{{.Dir}}' github.com/kubeflow/mpi-operator) && \
		cp "$$dir/manifests/base/kubeflow.org_mpijobs.yaml" $@ && chmod u+w $@

## test: unit, integration, short benchmark and end-to-end tests (what CI runs)
test: test-unit test-integration test-bench-short test-e2e

test-unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/)

# The chart's tests run helm, and the scheduler binary as the chart's Deployment runs it.
test-integration: bin/helm bin/kube-scheduler
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/integration/...

## test-e2e: the real binaries as processes (etcd, kube-apiserver with RBAC, kwok, our scheduler)
test-e2e: build
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/...

## test-bench-short: the benchmark harness on a few hundred nodes, so that it cannot rot (the
## fault run's short variant runs the binaries of bin/)
test-bench-short: build
	$(GO) test -count=1 -short -timeout 20m ./test/bench/...

## bench: the full benchmark harness (throughput, big gang, placement quality), then a plain
## pod's cycle in instructions; see docs/benchmarks.md
bench: build
	./hack/bench.sh
	./hack/bench-instructions.sh

## bench-faults: issue #45's fault run alone (about 70 minutes; `make bench` runs it too)
bench-faults: build
	BENCH_RUN='TestFaults|TestReport' BENCH_OUT=$${BENCH_OUT:-_output/bench-faults} ./hack/bench.sh

## bench-instructions: a plain pod's cycle in each profile, in instructions and cache misses (valgrind)
bench-instructions:
	./hack/bench-instructions.sh

## demo: a local control plane with simulated nodes; the seed examples scheduled and shown
demo: $(DEMO_BINS)
	$(GO) run ./hack/demo

## local-up: the same local control plane, left running until Ctrl-C
local-up: $(DEMO_BINS) bin/kubectl bin/kubectl-hypernode
	$(GO) run ./hack/local-up

## generate: deepcopy, defaults, conversions, clients, CRDs; and the k8s.io replace block
generate:
	./hack/update-codegen.sh

## verify: formatting, vet, staticcheck, and generated code and CRDs up to date
verify: bin/staticcheck
	./hack/verify.sh

# The linter, built from the module proxy like kwok (its own module and dependency graph).
bin/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

clean:
	rm -rf $(BIN)
