#!/usr/bin/env bash
# AWS calls per job on the dispatch hot path (claim -> running), counted by the
# test proxy over 100 jobs on moto, or SORTIE_CALLS_PER_JOB_JOBS (issue 4,
# "Measure"; goal: at most 3 per job).
#
#   scripts/bench-calls.sh
#
# Runs crates/lifecycle/tests/it/calls_per_job.rs through scripts/with-moto.sh and
# prints its table (Markdown, ready for BENCHMARKS.md). Cargo's and the test's
# full output goes to stderr. Exits with the test's status: 1 when over the goal.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

out="$(mktemp)"
trap 'rm -f "$out"' EXIT

set +e
scripts/with-moto.sh cargo test -p sortie-lifecycle --test it -- calls_per_job:: --nocapture 2>&1 \
    | tee "$out" >&2
status=${PIPESTATUS[0]}
set -e

echo
# The table and the summary the test prints, between its heading and its last line.
sed -n '/^AWS requests while dispatching/,/^per job:/p' "$out"
exit "$status"
