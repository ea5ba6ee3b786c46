#!/usr/bin/env bash
# `make test`'s Rust tests (built by the step before, see scripts/test.sh): two groups, each against
# its own moto server (scripts/with-moto.sh starts one per call), side by side (in turn
# with SORTIE_TEST_SERIAL=1; see below):
#   - the end-to-end binary, `e2e` of `tests/` (sortie-tests) (`sortie dev`, the pilot, Terraform and
#     the doubles together: about 13 minutes on its own), then every library's unit tests
#     (`--lib`: about 3 minutes, most of them moto-free);
#   - every other test binary (each crate's `it`, the binaries' unit tests, the rest:
#     about 17 minutes), then the doc tests.
# The libraries' unit tests ride with the end-to-end binary so the two groups end close
# together (before, the second group ran about 6 minutes past the first).
# Most of the end-to-end tests' time is waiting (on Terraform, on the sweeper's clock, on
# moto); a second moto halves the queue every request waits in (moto serves one request
# at a time), so the two groups overlap instead of adding up.
#
# The second group's targets are read from `cargo metadata`: every test-harness target
# (`test = true`) but `e2e`, so a new test target is never left out. Both groups keep
# `--workspace`, so neither changes the workspace's feature set (which would rebuild the
# AWS SDK); `--no-fail-fast` so one failure still shows every other. The end-to-end
# group's lines are prefixed `e2e| `.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo test --workspace --no-run || exit $?

# One argument per line; `--test it` names every crate's `it` at once, so each pair once.
mapfile -t args < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
m = json.load(sys.stdin)
members = set(m["workspace_members"])
pairs = []
for p in m["packages"]:
    if p["id"] not in members:
        continue
    for t in p["targets"]:
        if not t.get("test"):
            continue
        if "bin" in t["kind"]:
            pairs.append(("--bin", t["name"]))
        elif "test" in t["kind"] and t["name"] != "e2e":
            pairs.append(("--test", t["name"]))
for pair in dict.fromkeys(pairs):
    print("\n".join(pair))
')
[[ ${#args[@]} -gt 2 ]] || { echo "cargo-test: no test targets read from cargo metadata"; exit 1; }

# Side by side by default (about 6 minutes less than in turn on this machine);
# SORTIE_TEST_SERIAL=1 runs the groups one after the other (to time one alone, or on a
# machine with one core). Under side-by-side load `api it secrets_quota::two_hundred_jobs…`
# once failed (a few deletions outran the end path's retry budget); it now asserts what
# the product guarantees: the end path deletes most, the sweeper the rest.
parallel=1
[[ -n "${SORTIE_TEST_SERIAL:-}" ]] && parallel=""
began=$SECONDS
e2e() {
    scripts/with-moto.sh cargo test --workspace --no-fail-fast --test e2e --lib 2>&1 | sed -u 's/^/e2e| /'
    local rc="${PIPESTATUS[0]}"
    echo "cargo-test: the end-to-end group took $((SECONDS - began)) s"
    return "$rc"
}
e2e_rc=0
if [[ -n "$parallel" ]]; then
    e2e &
    e2e_pid=$!
    trap 'kill "$e2e_pid" 2>/dev/null' EXIT
fi

rc=0
scripts/with-moto.sh cargo test --workspace --no-fail-fast "${args[@]}" || rc=$?
cargo test --workspace --no-fail-fast --doc || rc=$?
echo "cargo-test: the other group took $((SECONDS - began)) s"

if [[ -n "$parallel" ]]; then
    wait "$e2e_pid" || e2e_rc=$?
    trap - EXIT
else
    e2e || e2e_rc=$?
fi
echo "cargo-test: the other tests exited $rc, the end-to-end tests $e2e_rc"
[[ $rc -eq 0 && $e2e_rc -eq 0 ]]
