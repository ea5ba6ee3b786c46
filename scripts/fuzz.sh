#!/usr/bin/env bash
# Run Sortie's cargo-fuzz targets (fuzz/, see docs/FUZZING.md).
#
#   scripts/fuzz.sh list                  the targets
#   scripts/fuzz.sh build [TARGET]        build one or every target
#   scripts/fuzz.sh TARGET [SECONDS]      fuzz one target for SECONDS (default 60)
#   scripts/fuzz.sh all [SECONDS]         fuzz every target in turn, SECONDS each
#
# cargo-fuzz is installed, pinned, into .tools/cargo-fuzz by `scripts/tools.sh fuzz`.
# This machine has only a stable toolchain: RUSTC_BOOTSTRAP=1 lets it take the
# nightly-only flags cargo-fuzz passes (-Zsanitizer=address, sanitizer coverage);
# the ASan runtime ships with the stable rust-std, so AddressSanitizer works as is.
# Set FUZZ_SANITIZER=none to build without it (faster, no memory checks).
#
# Each run reads the committed seeds (fuzz/corpus/TARGET, read-only) and keeps
# what it finds in the git-ignored fuzz/work/TARGET; a crash or a slow input
# (over FUZZ_TIMEOUT seconds, default 10) is written to fuzz/artifacts/TARGET/
# and fails the run. Each run ends with one line:
#   fuzz: target=T seconds=S execs=N corpus=C cov=V crashes=K status=X
# (corpus and cov are libFuzzer's final `corp:` and `cov:`: inputs kept, and
# coverage points reached).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
targets=(runner_config rule_body environment_body job_body ecs_event hostile_text)
sanitizer="${FUZZ_SANITIZER:-address}"
timeout="${FUZZ_TIMEOUT:-10}"

log() { printf 'fuzz: %s\n' "$*" >&2; }
usage() { sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[[ $# -ge 1 ]] || usage
"$root/scripts/tools.sh" fuzz </dev/null
export PATH="$root/.tools/cargo-fuzz/bin:$PATH"
export RUSTC_BOOTSTRAP=1
# The fuzz crate has its own workspace and target dir (fuzz/target); never a caller's.
unset CARGO_TARGET_DIR

known() {
    local t
    for t in "${targets[@]}"; do [[ "$t" == "$1" ]] && return 0; done
    log "unknown target '$1'; targets: ${targets[*]}"
    return 1
}

build() {
    log "+ cargo fuzz build -s $sanitizer $*"
    cargo fuzz build --fuzz-dir fuzz -s "$sanitizer" "$@" </dev/null
}

run() {
    local target="$1" seconds="$2"
    known "$target"
    local work="fuzz/work/$target" artifacts="fuzz/artifacts/$target" out
    mkdir -p "$work" "$artifacts"
    out="$(mktemp)"
    local before
    before="$(find "$artifacts" -type f | wc -l)"
    log "+ cargo fuzz run --fuzz-dir fuzz -s $sanitizer $target $work fuzz/corpus/$target -- -max_total_time=$seconds -timeout=$timeout -max_len=16384 -print_final_stats=1"
    set +e
    cargo fuzz run --fuzz-dir fuzz -s "$sanitizer" "$target" "$work" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout="$timeout" -max_len=16384 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" </dev/null 2>&1 | tee "$out" | grep -E --line-buffered 'DONE|pulse|NEW_FUNC|ERROR|panicked|SUMMARY|Test unit written|^#[0-9]+ +INITED' >&2
    local status="${PIPESTATUS[0]}"
    set -e
    local execs corpus cov crashes done_line
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n1)"
    done_line="$(grep -E '^#[0-9]+[[:space:]]+DONE' "$out" | tail -n1)" || true
    corpus="$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$done_line")"
    cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")"
    crashes=$(($(find "$artifacts" -type f | wc -l) - before))
    mkdir -p fuzz/work
    cp "$out" "fuzz/work/$target.log"
    rm -f "$out"
    echo "fuzz: target=$target seconds=$seconds execs=${execs:-?} corpus=${corpus:-?} cov=${cov:-?} crashes=$crashes status=$status"
    [[ "$status" == 0 && "$crashes" == 0 ]]
}

case "$1" in
    list) printf '%s\n' "${targets[@]}" ;;
    build)
        if [[ $# -ge 2 ]]; then known "$2" && build "$2"; else build; fi ;;
    all)
        seconds="${2:-60}"
        build
        failed=0
        for t in "${targets[@]}"; do run "$t" "$seconds" || failed=1; done
        exit "$failed" ;;
    -h|--help) usage ;;
    *) run "$1" "${2:-60}" ;;
esac
