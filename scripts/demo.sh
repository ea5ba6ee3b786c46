#!/usr/bin/env bash
# The demo: its runner, rule and environment made by `terraform apply` with the Sortie
# provider (examples/hello-platform), then a plan and an apply of examples/hello through
# `sortie dev`, driven by the `sortie` CLI, with real terraform and its state in (local)
# S3. Run it as `make demo`, which starts moto first (scripts/with-moto.sh) and then calls
# this script (DEMO_SKIP_BUILD=1 skips its build when the binaries are fresh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

: "${AWS_ENDPOINT_URL:?run me through scripts/with-moto.sh (make demo does)}"
echo "demo: building sortie and sortie-pilot"
# The whole workspace's binaries, as the tests build them: one feature set, one build.
[[ -n "${DEMO_SKIP_BUILD:-}" ]] || cargo build --quiet --workspace --bins
target_dir="${CARGO_TARGET_DIR:-target}"
sortie_bin="$target_dir/debug/sortie"
python=.tools/venv/bin/python

work=".tools/demo"
rm -rf "$work" && mkdir -p "$work"
ready="$work/ready.json"
"$sortie_bin" dev --ready-file "$ready" --work-dir "$work" --runner "$target_dir/debug/sortie-pilot" \
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

# What `sortie dev` prints as `export SORTIE_API_URL=... SORTIE_TOKEN=...`; no config file
# (a user's contexts stay out of the demo).
SORTIE_API_URL="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$ready")"
SORTIE_TOKEN="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$ready")"
SORTIE_CONFIG="$work/config.yaml"
export SORTIE_API_URL SORTIE_TOKEN SORTIE_CONFIG

sortie() {
  printf 'demo: $ sortie'; printf ' %q' "$@"; printf '\n'
  "$sortie_bin" "$@"
}

# The state bucket (boto3); then the demo's runner, rule and environment as code:
# examples/hello-platform applied with terraform-provider-sortie (the one built above,
# through a dev_overrides CLI configuration: no registry, no init).
"$python" scripts/demo.py bucket > /dev/null
# (Protocol 6: Terraform 1.0 or later. The jobs, which name no version, run the newest
# Terraform there, as a newcomer's would.)
terraform_bin="${SORTIE_TEST_TERRAFORM_111:-}"
[[ -n "$terraform_bin" ]] || terraform_bin="$PWD/.tools/bin/terraform-1.0.3"
platform="$work/platform"
mkdir -p "$platform"
cp examples/hello-platform/main.tf "$platform/"
cat > "$work/provider.tfrc" <<TFRC
provider_installation {
  dev_overrides {
    "sortie/sortie" = "$PWD/$target_dir/debug"
  }
  direct {}
}
TFRC
echo "demo: \$ terraform apply (examples/hello-platform: runner, rule, environment)"
if ! TF_CLI_CONFIG_FILE="$work/provider.tfrc" CHECKPOINT_DISABLE=1 "$terraform_bin" -chdir="$platform" \
  apply -input=false -auto-approve -no-color \
  -var "state_bucket=sortie-demo-state" -var "s3_endpoint=$AWS_ENDPOINT_URL" > "$work/platform.log" 2>&1; then
  echo "demo: terraform apply of the platform failed:"; cat "$work/platform.log"; exit 1
fi
grep -E '^(sortie_.*Creation complete|Apply complete)' "$work/platform.log" | sed 's/^/demo:   /'
sortie run plan acme/demo/hello --source examples/hello --var 'greeting=Hello from Sortie' --wait
sortie run apply acme/demo/hello --source examples/hello --var 'greeting=Hello from Sortie' --wait
sortie jobs list acme/demo/hello
"$sortie_bin" jobs list acme/demo/hello -o json | "$python" scripts/demo.py report
echo "demo: done (sortie dev's own log: $work/sortie-dev.log)"
