#!/usr/bin/env bash
# `make test`, the CI gate: every step in order, each timed, and at the end (pass or fail)
# a table of the steps with their minutes and the disk left, so a slow or full CI run says
# where its time and space went (issue 47 item 13).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

steps=()
failed=""
step_log="$(mktemp)"
started=$(date +%s)

free_gb() {
    df -P . | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'
}

minutes() {
    awk -v s="$1" 'BEGIN { printf "%.1f", s / 60 }'
}

summary() {
    local total=$(( $(date +%s) - started ))
    echo
    echo "make test: the steps"
    printf '  %-34s %8s  %s\n' "step" "minutes" "disk free after (GB)"
    for row in "${steps[@]}"; do
        IFS=$'\t' read -r name secs free <<<"$row"
        printf '  %-34s %8s  %s\n' "$name" "$(minutes "$secs")" "$free"
    done
    printf '  %-34s %8s\n' "total" "$(minutes "$total")"
    if [[ -d target ]]; then
        echo "  target/: $(du -sh target 2>/dev/null | cut -f1)"
    fi
    [[ -z "$failed" ]] || why
}

# why: after a failure, the failed step's own reason, last: CI keeps only the tail of the
# run, and a table alone says where a run failed but not why (stop 51's soak did not say).
# The lines that name a failure (FAILED, error, panicked, failures:), then the step's last
# lines, each cut to 400 characters.
why() {
    echo "make test: FAILED at: $failed"
    [[ -s "$step_log" ]] || return 0
    echo "make test: why, from the step's own output:"
    grep -a -E 'FAILED|[Ee]rror|panicked|^failures:|^---- |assert' "$step_log" | grep -av '^== ' \
        | tail -n 12 | cut -c1-400 | sed 's/^/  | /'
    echo "make test: the step's last lines:"
    tail -n 8 "$step_log" | cut -c1-400 | sed 's/^/  | /'
}
trap 'stop_preparing; summary' EXIT

# step NAME COMMAND...: runs COMMAND, records its time, stops the run if it fails.
step() {
    local name=$1
    shift
    echo "== $name: $*"
    local t0
    t0=$(date +%s)
    # Its output goes to the terminal as before and to step_log, kept for `why`; the
    # command runs in this shell (a function step, such as `prepared`, waits on its jobs).
    "$@" > >(tee "$step_log") 2>&1
    local rc=$?
    steps+=("$name"$'\t'"$(( $(date +%s) - t0 ))"$'\t'"$(free_gb)")
    if [[ $rc -ne 0 ]]; then
        failed="$name (exit $rc)"
        exit "$rc"
    fi
}

# Setup that needs no compiler (pip, npm, apt and downloads: scripts/tools.sh, the node
# venv and the infra linters' venvs) runs in the background beside the compile-bound steps:
# on two cores the compiler keeps both, while the installs wait on the network. The
# `tools` row is the time the steps after the build still had to wait for it.
prepare_dir="$(mktemp -d)"
(scripts/tools.sh && scripts/tools.sh node) </dev/null >"$prepare_dir/tools.log" 2>&1 &
tools_pid=$!
CHECK_INFRA_PREPARE=1 scripts/check-infra.sh </dev/null >"$prepare_dir/infra.log" 2>&1 &
infra_pid=$!
# prepared: waits for both, prints their logs, and fails if either failed.
prepared() {
    local rc=0
    wait "$tools_pid" || rc=$?
    wait "$infra_pid" || rc=$?
    tools_pid="" infra_pid=""
    cat "$prepare_dir/tools.log" "$prepare_dir/infra.log"
    rm -rf "$prepare_dir"
    return "$rc"
}
# stop_preparing: on an early exit, stops what still runs in the background.
stop_preparing() {
    [[ -z "$tools_pid$infra_pid" ]] || kill $tools_pid $infra_pid 2>/dev/null || true
}

step fmt cargo fmt --all --check
# One build of the workspace serves every step after it: each workspace crate compiles
# once, through clippy's driver with warnings denied and beside rustdoc with warnings
# denied (scripts/ci-rustc.sh), so clippy and the docs need no second build of every
# dependency in check mode (`cargo clippy` and `cargo doc` each made one: 10 to 15
# minutes on a fresh clone). Every cargo command from here on sees the same wrapper, so
# none rebuilds a workspace crate. The background installs above were started before it.
export RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/ci-rustc.sh"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# --all-targets as `cargo clippy --all-targets` lints (benches and examples too); then the
# binaries the tests run (function_binary builds `--workspace --bins --tests`).
step build-lint-doc bash -c 'cargo test --workspace --all-targets --no-run &&
    cargo build --workspace --bins --tests'
step tools prepared
step deny scripts/check-deny.sh
step licences scripts/check-licences.sh
step infra scripts/check-infra.sh
step docs scripts/check-docs.sh
# The console's JavaScript unit tests, on a pinned Node.js (issue 29).
step console-js scripts/console-js-tests.sh
# Every Rust test: one build, then the end-to-end binary beside all the others, each group
# on its own moto (scripts/cargo-test.sh); --no-fail-fast so a failure still shows every other.
step cargo-test scripts/cargo-test.sh
# Bounded API fuzzing: schemathesis's fuzzing and stateful phases (the stateful one follows
# the document's links), 10 examples per operation against `sortie dev` on moto.
step schemathesis env SCHEMATHESIS_PHASES=fuzzing,stateful \
    scripts/with-moto.sh scripts/schemathesis.sh 10
# A Python client generated from the served document runs a short scenario (issue 32).
step generated-client scripts/with-moto.sh scripts/generated-client.sh
# The console in headless Chromium (issue 29): three users, four eyes, a followed log, a plan
# review, hostile data, no console errors; real Terraform 1.11 (about 1 minute).
step console-browser scripts/with-moto.sh .tools/venv/bin/python scripts/console_test.py
# The 100-job soak (issue 27): chaos, a SIGKILL of `sortie dev`, nothing lost (about 3 min).
step soak scripts/with-moto.sh .tools/venv/bin/python scripts/soak.py \
    --jobs 100 --envs 20 --max-runner-s 4
