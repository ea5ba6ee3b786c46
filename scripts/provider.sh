#!/usr/bin/env bash
# Build terraform-provider-sortie and make it usable by a local Terraform:
#   - a filesystem mirror .tools/provider-mirror/registry.terraform.io/sortie/sortie/<version>/<os_arch>/
#   - a CLI configuration .tools/provider.tfrc using that mirror for sortie/sortie
#     (and the registry for everything else).
# Use it with:   export TF_CLI_CONFIG_FILE="$PWD/.tools/provider.tfrc"
# Terraform 1.0 or later (plugin protocol 6); Terraform 0.11 cannot load it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
profile="${PROVIDER_PROFILE:-release}"
if [[ "$profile" == release ]]; then
    if [[ ! -x "$root/target/release/terraform-provider-sortie" ]]; then
        # Say what is coming: an optimised build with LTO of every dependency (issue 47 item 12).
        echo "provider: building the release from nothing (optimised, LTO): about 17 minutes on 2 cores;" \
            "PROVIDER_PROFILE=debug make provider reuses the debug build (minutes after make test or make dev)" >&2
    fi
    cargo build -p sortie-provider --release
    bin="$root/target/release/terraform-provider-sortie"
else
    # The tests' feature set, as make test and make dev build: no dependency is built again.
    cargo build --workspace --bins --tests
    bin="$root/target/debug/terraform-provider-sortie"
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) arch="$(uname -m)" ;;
esac
os="$(uname -s | tr '[:upper:]' '[:lower:]')"
mirror="$root/.tools/provider-mirror"
dir="$mirror/registry.terraform.io/sortie/sortie/$version/${os}_${arch}"
rm -rf "$mirror/registry.terraform.io/sortie/sortie"
mkdir -p "$dir"
cp "$bin" "$dir/terraform-provider-sortie_v$version"
cat >"$root/.tools/provider.tfrc" <<TFRC
provider_installation {
  filesystem_mirror {
    path    = "$mirror"
    include = ["registry.terraform.io/sortie/sortie"]
  }
  direct {
    exclude = ["registry.terraform.io/sortie/sortie"]
  }
}
TFRC
echo "provider: $dir/terraform-provider-sortie_v$version"
echo "CLI config: export TF_CLI_CONFIG_FILE=$root/.tools/provider.tfrc"
