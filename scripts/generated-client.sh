#!/usr/bin/env bash
# The API as a generated client sees it (issue 32), against `sortie dev` on moto:
#
#   scripts/with-moto.sh scripts/generated-client.sh
#
# Starts `sortie dev` (the `local` launcher), reads the OpenAPI document it serves,
# generates a Python client from it with openapi-python-client (pinned in
# scripts/requirements-client.txt, installed by `scripts/tools.sh client` into
# .tools/client-venv), with every generator warning a failure (but its note that it
# skips the YAML alternative of request bodies), then runs
# scripts/generated_client_scenario.py, which uses only that client: a runner, a
# rule and a nested environment, a plan and an apply with their logs and outputs,
# and the environment deleted. An API change that breaks generated clients fails here.
#
# SORTIE_BIN and SORTIE_RUNNER_BIN name prebuilt `sortie` and `sortie-pilot`
# binaries; without them the script builds them as scripts/schemathesis.sh does.
# Work files (the document, the client, logs): .tools/generated-client/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

: "${AWS_ENDPOINT_URL:?run me through scripts/with-moto.sh}"
log() { printf 'generated-client: %s\n' "$*" >&2; }

scripts/tools.sh client </dev/null
venv="$root/.tools/client-venv"
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

work=".tools/generated-client"
rm -rf "$work" && mkdir -p "$work/state"
work="$(cd "$work" && pwd)"
ready="$work/ready.json"
"$sortie" dev --ready-file "$ready" --work-dir "$work" --runner "$runner" \
    --table sortie-generated-client --queue sortie-generated-client-jobs \
    --bucket sortie-generated-client-artifacts --bus sortie-generated-client \
    >"$work/sortie-dev.log" 2>&1 </dev/null &
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
log "sortie dev ready at $url (log $work/sortie-dev.log)"

# The document as served, never a copy in the tree: the client is what a user gets today.
curl -sS --fail-with-body "$url/v1/openapi.json" -o "$work/openapi.json"
cat >"$work/config.yaml" <<'EOF'
project_name_override: sortie-client
package_name_override: sortie_client
EOF
log "+ openapi-python-client generate"
# Its post-generation hook formats with ruff, from the same venv.
(cd "$work" && PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate --path openapi.json \
    --config config.yaml --meta none --output-path client/sortie_client </dev/null) >"$work/generate.log" 2>&1 || {
    log "openapi-python-client failed:"
    cat "$work/generate.log" >&2
    exit 1
}
# Every warning is a failure but one: the generator writes JSON bodies only, so it notes
# each request body's `application/yaml` alternative (which the API also reads) as skipped.
# Its messages start at column 0; the document parts it quotes are indented or braces.
if grep -vE '^[[:space:]{}]' "$work/generate.log" |
    grep -vE '^WARNING parsing .* within [a-z_]+\.$|^Unsupported content type application/yaml$|^Warning\(s\) encountered while generating' |
    grep -E 'WARNING|Warning|Unable|Cannot|Could not|Unsupported|Failure|not processed|Invalid|omitted|will not be generated' >&2; then
    log "openapi-python-client could not read all of the document (above; the whole log: $work/generate.log)"
    exit 1
fi
[[ -d "$work/client/sortie_client/api" ]] || { log "no client was generated"; cat "$work/generate.log" >&2; exit 1; }

log "+ scripts/generated_client_scenario.py"
PYTHONPATH="$work/client" SORTIE_READY="$ready" SORTIE_STATE_DIR="$work/state" \
    "$venv/bin/python" scripts/generated_client_scenario.py </dev/null || {
    log "the scenario failed; sortie dev's log: $work/sortie-dev.log"
    exit 1
}
if grep -q "panicked" "$work/sortie-dev.log"; then
    log "sortie dev panicked:"
    grep -A5 "panicked" "$work/sortie-dev.log" >&2
    exit 1
fi
log "passed"
