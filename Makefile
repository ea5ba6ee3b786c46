# Sortie developer entry points. CI runs `make test` (see .ci/run).
# Every tool beyond cargo is installed into .tools/ by scripts/tools.sh.
SHELL := /bin/bash
.DEFAULT_GOAL := test

.PHONY: dev test check tools fmt fmt-check lint clippy doc deny licences demo infra fuzz schemathesis demo-pr bench generated-client soak provider console

## test: install tools, check formatting, lint, then run every test against a local moto.
## The steps are in scripts/test.sh, which times each and prints a table at the end.
test:
	scripts/test.sh

## check: the quick gate before a push, under 3 minutes warm: formatting, clippy, the docs
## with warnings denied, cargo-deny, vendored licences, the docs against the code and the
## retired words (scripts/check-docs.sh), and the fast tier (`cargo test`
## without moto: the AWS tier skips itself; `make test` runs both)
check:
	scripts/tools.sh
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
	scripts/check-deny.sh
	scripts/check-licences.sh
	scripts/check-docs.sh
	cargo test --workspace

## tools: install the pinned tools (moto, cfn-lint, cargo-lambda, terraform 0.11.11, cargo-deny) into .tools/
tools:
	scripts/tools.sh

## fmt: format all Rust code in place
fmt:
	cargo fmt --all

fmt-check:
	cargo fmt --all --check

clippy:
	cargo clippy --workspace --all-targets -- -D warnings

## doc: build the workspace's docs with warnings denied (broken intra-doc links fail)
doc:
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

## deny: cargo-deny with deny.toml, offline, on the advisory snapshot in deny/advisory-db
deny:
	scripts/tools.sh
	scripts/check-deny.sh

## licences: every vendored file has a recorded licence (deny/vendored.toml)
licences:
	scripts/check-licences.sh

## lint: formatting check and clippy with warnings denied
lint: fmt-check clippy

## dev: build what local mode needs and start `sortie dev` on a local moto (Ctrl-C stops both).
## It builds with the tests' feature set (`--tests`), so after `make test` no dependency is
## built again; a first build from nothing takes about 10 minutes on 2 cores.
dev:
	scripts/tools.sh
	cargo build --workspace --bins --tests
	scripts/with-moto.sh target/debug/sortie dev $(DEV_ARGS)

## demo: plan and apply examples/hello through `sortie dev` with real terraform, state in local S3
demo:
	scripts/tools.sh
	scripts/with-moto.sh scripts/demo.sh

## demo-pr: a pull request through the GitHub double against `sortie dev` with real terraform 1.11:
## opened, planned, refused, approved, applied before merge, merged, applied after merge
demo-pr:
	scripts/tools.sh
	scripts/with-moto.sh scripts/demo-pr.sh

## bench: every speed promise measured side by side in one run, printed as one table
# (cold start against a bare probe and boto3, RSS, zip sizes, rule resolution, CPU per
# record, AWS calls per job, end to end through `sortie dev`). Release builds: about
# half an hour. BENCH_ARGS=--quick for a short trial. See BENCHMARKS.md.
bench:
	scripts/tools.sh
	scripts/with-moto.sh .tools/venv/bin/python scripts/bench.py $(BENCH_ARGS)

## soak: 1,000 jobs over 100 environments and 3 tenants through `sortie dev` under chaos
## (every message delivered twice, 30% of launches throttled, one SIGKILL, one tenant's
## burst of 700): 0 lost, 0 launched twice, 0 stuck, FIFO per environment; one table.
## Under 30 minutes on 2 cores. See scripts/soak.py and BENCHMARKS.md.
soak:
	scripts/tools.sh
	cargo build --quiet -p sortie-cli --bins
	scripts/with-moto.sh .tools/venv/bin/python scripts/soak.py $(SOAK_ARGS)

## infra: lint the SAM and target-account templates, the k8s manifests and the pilot Dockerfile
infra:
	scripts/check-infra.sh
	scripts/check-docs.sh

## fuzz: run each cargo-fuzz target for FUZZ_SECONDS seconds (default 60); see docs/FUZZING.md
FUZZ_SECONDS ?= 60
fuzz:
	scripts/fuzz.sh all $(FUZZ_SECONDS)

## console: the browser test of the console (scripts/console_test.py) against `sortie dev` on
## moto, writing its screenshots into docs/console/ (the README shows them). Needs the
## debug binaries (`cargo build -p sortie-cli -p sortie-pilot --bins`).
console:
	scripts/with-moto.sh .tools/venv/bin/python scripts/console_test.py --screenshots docs/console

## generated-client: generate a Python client from the served OpenAPI document and run a scenario through it
generated-client:
	scripts/with-moto.sh scripts/generated-client.sh

## schemathesis: fuzz the HTTP API of `sortie dev` on moto (SCHEMATHESIS_MAX_EXAMPLES per operation, default 100)
SCHEMATHESIS_MAX_EXAMPLES ?= 100
schemathesis:
	scripts/with-moto.sh scripts/schemathesis.sh $(SCHEMATHESIS_MAX_EXAMPLES)

## provider: build terraform-provider-sortie, write a filesystem mirror and a CLI config under .tools/ (docs/provider/index.md)
provider:
	scripts/provider.sh
