#!/usr/bin/env bash
# Regenerate crates/provider/src/proto/*.rs from the vendored protos in crates/provider/proto/
# (protox: no system protoc). The generated code is committed, so a normal build needs neither.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/crates/provider/proto-gen"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/proto-gen}" cargo run --quiet
