#!/usr/bin/env bash
# The console's JavaScript unit tests (crates/console/js-tests/*.test.mjs: ANSI parsing,
# the log buffer, plan grouping, routes, who may decide, the pull-request card's words and
# form body) with the pinned Node.js of .tools/node-venv (`scripts/tools.sh node`), through
# `node --test`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/tools.sh" node </dev/null
cd "$root"
shopt -s nullglob
tests=(crates/console/js-tests/*.test.mjs)
if [[ ${#tests[@]} -eq 0 ]]; then
    echo "console-js-tests: no tests in crates/console/js-tests/" >&2
    exit 1
fi
exec "$root/.tools/node-venv/bin/node" --test "${tests[@]}"
