#!/usr/bin/env bash
# The demo: a plan and an apply of examples/hello through `sortie dev`, with real
# terraform and its state in (local) S3. Run it as `make demo`, which starts moto
# first (scripts/with-moto.sh) and then calls this script.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

: "${AWS_ENDPOINT_URL:?run me through scripts/with-moto.sh (make demo does)}"
echo "demo: building sortie and sortie-runner"
cargo build --quiet -p sortie-cli -p sortie-runner
target_dir="${CARGO_TARGET_DIR:-target}"

work=".tools/demo"
rm -rf "$work" && mkdir -p "$work"
ready="$work/ready.json"
"$target_dir/debug/sortie" dev --ready-file "$ready" --work-dir "$work" --runner "$target_dir/debug/sortie-runner" \
  > "$work/sortie-dev.log" 2>&1 &
dev_pid=$!
cleanup() { kill "$dev_pid" 2>/dev/null || true; wait "$dev_pid" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

for _ in $(seq 1 100); do
  [[ -s "$ready" ]] && break
  kill -0 "$dev_pid" 2>/dev/null || { echo "demo: sortie dev exited:"; cat "$work/sortie-dev.log"; exit 1; }
  sleep 0.1
done
[[ -s "$ready" ]] || { echo "demo: sortie dev did not start"; cat "$work/sortie-dev.log"; exit 1; }

.tools/venv/bin/python scripts/demo.py "$ready"
echo "demo: done (sortie dev's own log: $work/sortie-dev.log)"
