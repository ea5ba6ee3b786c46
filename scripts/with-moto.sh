#!/usr/bin/env bash
# Run a command against a local AWS: a moto server on a free loopback port.
#
#   scripts/with-moto.sh cargo test --workspace
#
# Installs the project tools (scripts/tools.sh) if needed, starts moto's server
# on 127.0.0.1:<free port> through scripts/moto_server.py (moto_server with
# DynamoDB requests serialised, so a failed transaction's rollback cannot undo
# other clients' writes; see that file), waits until it answers, then runs the
# command with:
#   SORTIE_TEST_AWS_ENDPOINT, AWS_ENDPOINT_URL   http://127.0.0.1:<port>
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY      testing
#   AWS_REGION, AWS_DEFAULT_REGION                us-east-1
#   SORTIE_TEST_TERRAFORM                         absolute path of Terraform 0.11.11
#   SORTIE_TEST_TERRAFORM_1                       absolute path of Terraform 1.0.3
#                                                 (.tools/bin/terraform-1.0.3)
#   SORTIE_TEST_TERRAFORM_111                     absolute path of the machine's Terraform 1.11.x
#                                                 (`terraform` on PATH outside .tools; kept when
#                                                 already set; empty when there is none, and the
#                                                 tests that need it fail saying so)
#   PATH                                          .tools/bin and .tools/venv/bin first
# moto is stopped when the script exits, whatever happens; the script exits
# with the command's status. moto's log goes to .tools/moto-logs/moto.<pid>.log.
set -euo pipefail

if [[ $# -eq 0 ]]; then
    echo "usage: scripts/with-moto.sh CMD [ARGS...]" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools"
venv="$tools/venv"
# One log per run (several runs can share a machine); logs older than two hours are pruned.
mkdir -p "$tools/moto-logs"
find "$tools/moto-logs" -name 'moto.*.log' -mmin +120 -delete 2>/dev/null || true
log_file="$tools/moto-logs/moto.$$.log"

"$root/scripts/tools.sh" </dev/null

log() { printf 'with-moto: %s\n' "$*" >&2; }

moto_pid=""
stop_moto() {
    if [[ -n "$moto_pid" ]] && kill -0 "$moto_pid" 2>/dev/null; then
        kill "$moto_pid" 2>/dev/null || true
        # Give it a moment to exit cleanly, then make sure.
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$moto_pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$moto_pid" 2>/dev/null || true
        wait "$moto_pid" 2>/dev/null || true
    fi
    moto_pid=""
}
trap stop_moto EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    "$venv/bin/python" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# True once anything answers HTTP on the port (moto replies even to a bare GET /).
answers() {
    "$venv/bin/python" - "$1" <<'PY' 2>/dev/null
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/moto-api/", timeout=2)
except urllib.error.HTTPError:
    pass
PY
}

: >"$log_file"
port=""
# The port is free when picked but could be taken before moto binds it: retry a few times.
for attempt in 1 2 3; do
    port="$(free_port)"
    echo "--- attempt $attempt: moto_server on 127.0.0.1:$port" >>"$log_file"
    "$venv/bin/python" "$root/scripts/moto_server.py" -H 127.0.0.1 -p "$port" </dev/null >>"$log_file" 2>&1 &
    moto_pid=$!
    deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        kill -0 "$moto_pid" 2>/dev/null || break
        if answers "$port"; then
            break 2
        fi
        sleep 0.3
    done
    log "moto did not come up on port $port (attempt $attempt); see $log_file"
    stop_moto
done
if [[ -z "$moto_pid" ]]; then
    log "giving up: moto_server never answered; last lines of $log_file:"
    tail -n 20 "$log_file" >&2 || true
    exit 1
fi
log "moto_server ready on http://127.0.0.1:$port (pid $moto_pid, log ${log_file#"$root/"})"

export SORTIE_TEST_AWS_ENDPOINT="http://127.0.0.1:$port"
export AWS_ENDPOINT_URL="$SORTIE_TEST_AWS_ENDPOINT"
export AWS_ACCESS_KEY_ID=testing
export AWS_SECRET_ACCESS_KEY=testing
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
export SORTIE_TEST_TERRAFORM="$tools/bin/terraform"
export SORTIE_TEST_TERRAFORM_1="$tools/bin/terraform-1.0.3"
# The machine's own Terraform (1.11.4 in the image), looked up before .tools/bin (whose
# `terraform` is 0.11.11) goes first on PATH, skipping .tools/bin if it is there already.
if [[ -z "${SORTIE_TEST_TERRAFORM_111:-}" ]]; then
    SORTIE_TEST_TERRAFORM_111=""
    IFS=: read -r -a path_dirs <<<"$PATH"
    for dir in "${path_dirs[@]}"; do
        if [[ -n "$dir" && "$dir" != "$tools/bin" && -x "$dir/terraform" ]]; then
            SORTIE_TEST_TERRAFORM_111="$dir/terraform"
            break
        fi
    done
fi
export SORTIE_TEST_TERRAFORM_111
export PATH="$tools/bin:$venv/bin:$PATH"
# Keep any real AWS profile or session out of the way.
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_SECURITY_TOKEN

set +e
"$@"
status=$?
set -e
exit "$status"
