#!/usr/bin/env bash
# Regenerate deny/advisory-db/, the pruned copy of the RustSec advisory database that
# scripts/check-deny.sh hands to cargo-deny (CI cannot fetch the database from GitHub).
#
#   scripts/refresh-advisories.sh <advisory-db checkout>
#
# The argument is any git repository of https://github.com/rustsec/advisory-db (a work
# tree or a bare clone); its HEAD is read. Kept: the advisories of every crate named in
# Cargo.lock, the database's licences (CC0-1.0, and CC-BY-4.0 for GHSA-imported text),
# SNAPSHOT (commit and date) and crates-with-advisories.txt (every crate the snapshot
# has advisories for, so the check can tell when a newly locked crate needs a refresh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${1:?usage: scripts/refresh-advisories.sh <advisory-db git checkout>}"
out="$root/deny/advisory-db"

commit="$(git -C "$src" rev-parse HEAD)"
date="$(git -C "$src" show -s --format=%cI HEAD)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git -C "$src" archive --format=tar HEAD crates LICENSE.txt LICENSES | tar -x -C "$tmp"

# Crate names in the lock file (the checked workspace's only lock file).
grep '^name = ' "$root/Cargo.lock" | sed 's/^name = "\(.*\)"$/\1/' | sort -u >"$tmp/locked.txt"

rm -rf "$out"
mkdir -p "$out/crates" "$out/LICENSES"
cp "$tmp/LICENSE.txt" "$out/"
cp "$tmp"/LICENSES/*.txt "$out/LICENSES/"
(cd "$tmp/crates" && ls -1 | sort) >"$out/crates-with-advisories.txt"
kept=0
while read -r name; do
    if [[ -d "$tmp/crates/$name" ]]; then
        cp -r "$tmp/crates/$name" "$out/crates/"
        kept=$((kept + $(find "$tmp/crates/$name" -name '*.md' | wc -l)))
    fi
done <"$tmp/locked.txt"
cat >"$out/SNAPSHOT" <<SNAP
source = "https://github.com/rustsec/advisory-db"
commit = "$commit"
date = "$date"
SNAP
printf 'refresh-advisories: %s advisories for %s of %s locked crates, snapshot %s (%s)\n' \
    "$kept" "$(ls -1 "$out/crates" | wc -l)" "$(wc -l <"$tmp/locked.txt")" "${commit:0:12}" "$date" >&2
