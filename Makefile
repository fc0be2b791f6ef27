# tfswap's build, setup and test entry points. `make demo` and `make test` are the two
# commands the README starts with; CI runs `make test` through .ci/run.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
# Packages that must build without cgo: the pure rewriter, its Go facade (the module's root
# package and session/, whose sessions need the tag) and its CLI.
PURE_PKGS := . ./graphdef/... ./rewrite/... ./triggers/... ./cost/... ./cmd/... ./internal/... ./profiling/... ./tune/... ./gpucheck/... ./session/...
TFENV := source ./.tfenv &&

.PHONY: setup demo test test-go test-pure test-python bench bench-quick fixtures zoo zoo-check clean gpu-check

# setup installs the GPU runtime (requirements-gpu.txt) on a machine with an NVIDIA GPU, the
# CPU one otherwise; `make setup GPU=1` or `GPU=0` decides instead.
setup:
	GPU="$(GPU)" ./scripts/setup.sh

# demo rewrites the bundled residual-network training graph and trains the original and the
# rewritten graph for a few steps in a Go TensorFlow session (two-device CPU emulation).
demo: setup
	./scripts/demo.sh

test: setup test-pure test-go test-python

# test-pure proves the rewriter builds and passes its tests without cgo or TensorFlow, and
# runs the tests that exist only in such a build (cmd/tfswap/profile_stub_test.go,
# tfrun/runtime_required_test.go). TFSWAP_PURE_RUN tells the latter that test-go runs tfrun's
# TensorFlow-backed tests next, so that it passes under CI=true here.
test-pure:
	CGO_ENABLED=0 $(GO) build $(PURE_PKGS)
	CGO_ENABLED=0 $(GO) vet $(PURE_PKGS) ./tfrun/...
	TFSWAP_PURE_RUN=1 CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m $(PURE_PKGS) ./tfrun/...

# test-go runs every Go test, the TensorFlow-backed ones included.
test-go:
	$(TFENV) $(GO) vet -tags tensorflow ./...
	$(TFENV) $(GO) test -tags tensorflow -count=1 -timeout 30m ./...

test-python:
	@if ls tests/python/test_*.py >/dev/null 2>&1; then \
		.venv/bin/python -m pytest -q tests/python; \
	fi

# bench regenerates docs/BENCHMARKS.md (about 30 min on 2 cores; bench-quick: a few minutes).
# It is not part of `make test`.
bench: setup
	.venv/bin/python bench/run.py --report

bench-quick: setup
	.venv/bin/python bench/run.py --quick --report

# gpu-check measures on this machine's GPU what the simulator predicts (docs/GPU_CHECK.md);
# without a GPU it says so and exits 0. GPU_CHECK_ARGS adds options (e.g. --models resnet50).
gpu-check: setup
	TF_CPP_MIN_LOG_LEVEL=$${TF_CPP_MIN_LOG_LEVEL:-2} bin/tfswap gpu-check $(GPU_CHECK_ARGS)

fixtures:
	.venv/bin/python testmodels/gen.py

# zoo regenerates testmodels/zoo/ (user-style Keras and TF2 graphs, testmodels/README.md), the
# committed graphs and the two too large to commit; zoo-check regenerates the committed ones
# and compares them byte for byte.
zoo: setup
	.venv/bin/python testmodels/zoo.py --all

zoo-check: setup
	.venv/bin/python testmodels/zoo.py --check

clean:
	rm -rf bin out
