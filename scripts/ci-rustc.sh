#!/usr/bin/env bash
# One compile serves the tests, clippy and rustdoc (issue 47 item 13).
#
# `make test` sets this script as cargo's RUSTC_WORKSPACE_WRAPPER for its builds of the
# workspace, so every workspace crate compiled for the tests is also:
#   - linted: the compile runs through clippy-driver (clippy's own rustc driver, which
#     compiles as rustc does and runs clippy's lints on the way), with CLIPPY_ARGS as
#     `cargo clippy -- -D warnings` sets it;
#   - documented, when `cargo doc` would document it: a library, or a binary with no
#     library of its name (not a test harness, a build script, a bench or an example): rustdoc runs with the same crate name,
#     edition, cfgs, lints and `--extern`s, and `-D warnings`, as
#     `RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps` would.
#
# Why: `cargo clippy` and `cargo doc` each build every dependency again in check mode
# (cargo keeps check and build artifacts apart), which was 10 to 15 of `make test`'s
# minutes on a fresh clone. Here the dependencies are built once, for the tests, and
# rustdoc reads their metadata from the rlibs the build made.
#
# Cargo calls it as `ci-rustc.sh <path to rustc> <rustc's arguments>`. Dependencies never
# pass through it (cargo applies a workspace wrapper to workspace members only).
# `make check` keeps plain `cargo clippy` and `cargo doc`, which a developer runs alone.
set -uo pipefail

rustc=$1
shift
toolchain_bin=$(dirname "$rustc")
driver="$toolchain_bin/clippy-driver"
[[ -x "$driver" ]] || driver=clippy-driver
rustdoc="$toolchain_bin/rustdoc"
[[ -x "$rustdoc" ]] || rustdoc=rustdoc

# What is compiled: read the arguments rustdoc shares with rustc, and whether this compile
# makes a library or a binary that `cargo doc` would document.
doc_args=()
crate_name="" crate_type="" source="" emits_link="" is_test=""
args=("$@")
i=0
while ((i < ${#args[@]})); do
    arg=${args[i]}
    next=${args[i + 1]:-}
    case "$arg" in
        --crate-name) crate_name=$next; doc_args+=("$arg" "$next"); ((i++)) ;;
        --crate-type) crate_type=$next; doc_args+=("$arg" "$next"); ((i++)) ;;
        --edition=*) doc_args+=("$arg") ;;
        --cfg | --check-cfg | -L | --extern | --cap-lints) doc_args+=("$arg" "$next"); ((i++)) ;;
        --warn=* | --allow=* | --deny=* | --forbid=* | --cap-lints=*) doc_args+=("$arg") ;;
        -W | -A | -D | -F) doc_args+=("$arg" "$next"); ((i++)) ;;
        --error-format=*) doc_args+=("$arg") ;;
        --emit=*) [[ "$arg" == *link* ]] && emits_link=1 ;;
        --test) is_test=1 ;;
        -*) ;;
        *.rs) source=$arg ;;
    esac
    ((i++))
done

documented=""
if [[ -n "$emits_link" && -z "$is_test" && -n "$source" && "$crate_name" != build_script_* ]]; then
    case "$crate_type" in
        lib | rlib | proc-macro) documented=1 ;;
        # A binary is documented with its private items, as `cargo doc` does, unless a
        # library of the same crate name beside it takes its place (cargo skips it then).
        bin)
            if [[ "$source" == */src/bin/* ]] ||
                [[ "$source" == *src/main.rs && ! -e "${source%main.rs}lib.rs" ]]; then
                documented=1
                doc_args+=(--document-private-items)
            fi
            ;;
    esac
fi

if [[ -z "$documented" || -n "${SORTIE_CI_NO_RUSTDOC:-}" ]]; then
    exec "$driver" "$rustc" "$@"
fi

# rustdoc beside the compile; its diagnostics (JSON, as cargo asked of rustc) follow the
# compile's once both end, so the two never interleave mid-line.
out="${CARGO_TARGET_DIR:-target}/ci-doc/$crate_name-$crate_type"
doc_err=$(mktemp)
"$rustdoc" "${doc_args[@]}" "$source" -o "$out" -D warnings \
    --json=diagnostic-rendered-ansi --crate-version "${CARGO_PKG_VERSION:-0.0.0}" \
    2>"$doc_err" &
doc_pid=$!
"$driver" "$rustc" "$@"
rc=$?
wait "$doc_pid"
doc_rc=$?
cat "$doc_err" >&2
rm -f "$doc_err"
if ((doc_rc != 0)); then
    echo "ci-rustc: rustdoc refused $crate_name ($source) with -D warnings (exit $doc_rc)" >&2
fi
((rc != 0)) && exit "$rc"
exit "$doc_rc"
