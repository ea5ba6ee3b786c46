#!/usr/bin/env bash
# The pull-request demo: a pull request played through the GitHub double (a strict double
# of GitHub's API on 127.0.0.1, crates/testkit/src/github) against `sortie dev`, with the
# real pilot and the machine's Terraform 1.11 (`terraform_data`): connected and bound with
# the CLI, opened, planned, refused an apply before its approval, approved, applied before
# merge, merged and applied after merge. It prints the checks and the comment as GitHub
# would show them. Run it as `make demo-pr`, which starts moto first
# (scripts/with-moto.sh); DEMO_SKIP_BUILD=1 skips the build when the binaries are fresh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

: "${AWS_ENDPOINT_URL:?run me through scripts/with-moto.sh (make demo-pr does)}"
command -v terraform >/dev/null || { echo "demo-pr: needs terraform 1.5 or later on PATH (terraform_data)"; exit 1; }
echo "demo-pr: building sortie, sortie-pilot and demo-pr"
# The whole workspace's binaries, as the tests build them: one feature set, one build.
[[ -n "${DEMO_SKIP_BUILD:-}" ]] || cargo build --quiet --workspace --bins
target_dir="${CARGO_TARGET_DIR:-target}"
exec "$target_dir/debug/demo-pr" "$target_dir/debug/sortie" "$target_dir/debug/sortie-pilot" "$PWD/.tools/demo-pr"
