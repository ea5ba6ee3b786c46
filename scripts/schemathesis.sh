#!/usr/bin/env bash
# Fuzz the HTTP API with schemathesis against `sortie dev` on moto:
#
#   scripts/with-moto.sh scripts/schemathesis.sh [MAX_EXAMPLES]
#
# Builds and starts `sortie dev` (the `local` launcher), creates fixtures (a
# runner acme/local of type local with local state storage, a rule acme:default,
# environments acme/prod and acme/payments/prod and one plan job), then runs
# schemathesis on the served
# /v1/openapi.json with the dev token and the checks not_a_server_error,
# status_code_conformance and response_schema_conformance. MAX_EXAMPLES (default
# 20, or SCHEMATHESIS_MAX_EXAMPLES) bounds the test cases per operation and phase.
# Configuration: scripts/schemathesis.toml, with scripts/schemathesis_hooks.py for what the
# stateful phase needs beyond it. Reports and logs: .tools/schemathesis/.
# Exits non-zero on any failure. schemathesis is installed, pinned, by
# `scripts/tools.sh schemathesis`; SCHEMATHESIS_SEED fixes the seed (default 1);
# SCHEMATHESIS_PHASES picks the phases (default all: examples, coverage, fuzzing,
# stateful; the coverage phase alone sends about 3,000 requests whatever
# MAX_EXAMPLES is, so the bounded run in `make test` uses `fuzzing` and `stateful`,
# whose state machine follows the document's links). SORTIE_BIN and
# SORTIE_RUNNER_BIN name prebuilt binaries (no build then).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

: "${AWS_ENDPOINT_URL:?run me through scripts/with-moto.sh}"
max_examples="${1:-${SCHEMATHESIS_MAX_EXAMPLES:-20}}"
seed="${SCHEMATHESIS_SEED:-1}"
phases=()
[[ -n "${SCHEMATHESIS_PHASES:-}" ]] && phases=(--phases "$SCHEMATHESIS_PHASES")
log() { printf 'schemathesis: %s\n' "$*" >&2; }

scripts/tools.sh schemathesis </dev/null
venv=".tools/schemathesis-venv"
target_dir="${CARGO_TARGET_DIR:-target}"
sortie="${SORTIE_BIN:-}"
runner="${SORTIE_RUNNER_BIN:-}"
if [[ -z "$sortie" || -z "$runner" ]]; then
    log "building sortie and sortie-pilot"
    # With --tests, features resolve as in `cargo test --workspace`, so this reuses the
    # tests' compiled dependencies instead of compiling a second copy of each.
    cargo build --quiet --workspace --bins --tests
    sortie="$target_dir/debug/sortie"
    runner="$target_dir/debug/sortie-pilot"
fi

work=".tools/schemathesis"
rm -rf "$work" && mkdir -p "$work/state"
work="$(cd "$work" && pwd)"
ready="$work/ready.json"
"$sortie" dev --ready-file "$ready" --work-dir "$work" --runner "$runner" \
    --table sortie-schemathesis --queue sortie-schemathesis-jobs --bucket sortie-schemathesis-artifacts \
    --bus sortie-schemathesis >"$work/sortie-dev.log" 2>&1 </dev/null &
dev_pid=$!
cleanup() { kill "$dev_pid" 2>/dev/null || true; wait "$dev_pid" 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq 1 300); do
    [[ -s "$ready" ]] && break
    kill -0 "$dev_pid" 2>/dev/null || { log "sortie dev exited:"; cat "$work/sortie-dev.log" >&2; exit 1; }
    sleep 0.1
done
[[ -s "$ready" ]] || { log "sortie dev did not start"; cat "$work/sortie-dev.log" >&2; exit 1; }
url="$("$venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$ready")"
SORTIE_TOKEN="$("$venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$ready")"
export SORTIE_TOKEN
# The state directory of the fixture runner, for the runners the stateful phase
# creates (scripts/schemathesis_hooks.py).
export SORTIE_STATE_DIR="$work/state"
log "sortie dev ready at $url (log $work/sortie-dev.log)"

# call METHOD PATH [BODY [CONTENT-TYPE]]: prints the body; fails unless 2xx.
call() {
    local args=(-sS --fail-with-body -X "$1" -H "Authorization: Bearer $SORTIE_TOKEN")
    [[ $# -ge 3 ]] && args+=(-H "Content-Type: ${4:-application/json}" --data-binary "$3")
    curl "${args[@]}" "$url$2"
}
call POST /v1/groups/acme/-/runners/local "runner_configuration: {type: local, timeout_seconds: 120}
state_storage_configuration: {type: local, directory: \"$work/state\"}" application/yaml >/dev/null
call POST /v1/groups/acme/-/rules '{"id":"default","runner_id":"acme/local"}' >/dev/null
call POST /v1/groups/acme/-/environments '{"name":"prod","env_type":"production"}' >/dev/null
# A nested environment, created through the canonical (percent-encoded) form.
call POST /v1/groups/acme%2Fpayments/-/environments '{"name":"prod","env_type":"production"}' >/dev/null
SORTIE_JOB="$(call POST /v1/environments/acme%2Fprod/-/jobs '{"operation":"plan","files":{"main.tf":""}}' |
    "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
export SORTIE_JOB
log "fixtures: runner acme/local, rule acme:default, environments acme/prod and acme/payments/prod, job $SORTIE_JOB"

log "+ schemathesis run $url/v1/openapi.json --max-examples $max_examples --seed $seed ${phases[*]}"
set +e
# `filter_too_much` is a generator health check, not an API check: group and
# environment paths with their slashes cannot be generated for an OpenAPI path
# parameter, so most generated values are filtered out for those operations.
# The job id goes into the dictionaries literally (schemathesis does not expand
# ${...} there), so the script runs a copy of the configuration with it filled in.
sed "s/\${SORTIE_JOB}/$SORTIE_JOB/g" scripts/schemathesis.toml >"$work/schemathesis.toml"
"$venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$url/v1/openapi.json" \
    --checks not_a_server_error,status_code_conformance,response_schema_conformance \
    --suppress-health-check filter_too_much \
    --max-examples "$max_examples" --seed "$seed" --no-color "${phases[@]}" \
    --report junit,ndjson --report-dir "$work/report" </dev/null 2>&1 | tee "$work/schemathesis.log"
status="${PIPESTATUS[0]}"
set -e

# One summary line (requests, 5xx answers, failures per check); the details
# (answers per operation and status, each distinct failure) go to summary.txt.
report="$(ls -t "$work"/report/*.ndjson | head -n1)"
"$venv/bin/python" scripts/schemathesis-summary.py "$report" --detail >"$work/summary.txt" || true
head -n1 "$work/summary.txt"
log "details: $work/summary.txt; sortie dev's log: $work/sortie-dev.log"
if grep -q "panicked" "$work/sortie-dev.log"; then
    log "sortie dev panicked:"
    grep -A5 "panicked" "$work/sortie-dev.log" >&2
    status=1
fi
exit "$status"
