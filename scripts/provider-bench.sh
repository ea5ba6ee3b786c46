#!/usr/bin/env bash
# The provider's speed figure (issue 30): `terraform plan` with refresh over 200 Sortie
# resources against `sortie dev` on moto, with Terraform 1.0.3 and 1.11.4 (BENCHMARKS.md).
# Debug builds (the provider and the `sortie` binary next to it, as the tests use them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/with-moto.sh cargo test -p sortie-provider --test it -- speed:: --ignored --nocapture 2>&1 \
  | grep -E '^provider-bench:|test result|panicked'
