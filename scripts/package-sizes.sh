#!/usr/bin/env bash
# Build the four Lambda functions as SAM/Lambda would deploy them and print
# each zip's size (goal: at most 8 MiB each; record them in BENCHMARKS.md).
#
#   scripts/package-sizes.sh            # arm64, as in infra/template.yaml
#   ARCH=x86_64 scripts/package-sizes.sh
#
# Not part of CI or `make test`: a release build with LTO takes many minutes.
# cargo-lambda (and zig, its cross linker, as the ziglang wheel) come from
# PyPI through scripts/tools.sh. The arm64 build needs Rust's
# aarch64-unknown-linux-gnu standard library (`rustup target add
# aarch64-unknown-linux-gnu`). Exits 1 when a zip is over the limit.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

arch="${ARCH:-arm64}"
limit_mib="${LIMIT_MIB:-8}"
case "$arch" in
    arm64) flag=--arm64 target=aarch64-unknown-linux-gnu ;;
    x86_64) flag=--x86-64 target=x86_64-unknown-linux-gnu ;;
    *) echo "package-sizes: ARCH must be arm64 or x86_64, not $arch" >&2; exit 2 ;;
esac

log() { printf 'package-sizes: %s\n' "$*" >&2; }

scripts/tools.sh </dev/null
# The venv first on PATH: cargo-lambda finds zig through its python (ziglang).
export PATH="$root/.tools/venv/bin:$PATH"

if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    log "the Rust standard library for $target is not installed:"
    log "  rustup target add $target    (or ARCH=x86_64 for a same-host estimate)"
    exit 2
fi

# The binaries are the crates under functions/ (api, dispatch, task-events, sweeper, pulls, notify).
mapfile -t functions < <(find functions -mindepth 2 -maxdepth 2 -name Cargo.toml -printf '%h\n' | xargs -n1 basename | sort)
bins=()
for f in "${functions[@]}"; do bins+=(--bin "$f"); done

start=$SECONDS
log "+ cargo lambda build --release $flag --output-format zip ${bins[*]}"
cargo lambda build --release "$flag" --output-format zip "${bins[@]}" </dev/null
log "built in $((SECONDS - start))s"

limit=$((limit_mib * 1024 * 1024))
over=0
printf '| function | zip (bytes) | zip (MiB) | bootstrap (MiB) |\n|---|---:|---:|---:|\n'
for f in "${functions[@]}"; do
    zip="target/lambda/$f/bootstrap.zip"
    [[ -f "$zip" ]] || { log "missing $zip"; exit 1; }
    bytes=$(stat -c %s "$zip")
    # The zip's size, and the uncompressed size from the zip's own listing.
    python3 - "$f" "$zip" <<'PY'
import os, sys, zipfile
name, path = sys.argv[1:3]
size = os.path.getsize(path)
raw = sum(i.file_size for i in zipfile.ZipFile(path).infolist())
print(f"| {name} | {size} | {size / 1048576:.2f} | {raw / 1048576:.2f} |")
PY
    if ((bytes > limit)); then
        log "$f: $zip is over ${limit_mib} MiB"
        over=1
    fi
done
log "arch $arch, $(rustc --version), profile release (see [profile.release] in Cargo.toml)"
exit "$over"
