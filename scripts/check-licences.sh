#!/usr/bin/env bash
# Check that every vendored file has a recorded licence: deny/vendored.toml says which
# files are vendored kinds and lists each one with its licence and licence file.
#
#   scripts/check-licences.sh              self-test, then check this repository
#   scripts/check-licences.sh --self-test  only prove the check fails and passes on a temp repo
#
# Files are git's tracked and untracked-but-not-ignored ones, so a new file fails here
# before it is committed. Needs only git and python3 (tomllib, Python 3.11+).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

check() { # check <repo root>
    python3 - "$1" <<'PY'
import fnmatch, re, subprocess, sys, tomllib
from pathlib import Path

root = Path(sys.argv[1])
manifest = root / "deny/vendored.toml"
out = subprocess.run(
    ["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
    check=True, capture_output=True).stdout.decode()
files = sorted(f for f in set(out.split("\0")) if f and (root / f).is_file())

KIND_DIRS = {"vendor", "third_party", "third-party", "node_modules"}
KIND_EXTS = {".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".proto", ".wasm"}
def vendored_kind(path):
    p = Path(path)
    return p.suffix in KIND_EXTS or any(part in KIND_DIRS for part in p.parts[:-1])

cfg = tomllib.loads(manifest.read_text())
allow = set(cfg.get("allow", []))
errors = []
covered = set()
for i, entry in enumerate(cfg.get("vendored", [])):
    name = f"deny/vendored.toml entry {i + 1} ({', '.join(entry.get('paths', [])) or 'no paths'})"
    pats, lic = entry.get("paths", []), entry.get("licence", "")
    if not pats:
        errors.append(f"{name}: no `paths`")
    if not lic:
        errors.append(f"{name}: no `licence`")
    for lid in re.split(r"[()\s]+|\bAND\b|\bOR\b", lic):
        if lid and lid not in ("AND", "OR", "WITH") and lid not in allow:
            errors.append(f"{name}: licence `{lid}` is not in `allow`")
    if not entry.get("first-party", False):
        lf = entry.get("licence-file", "")
        if not lf or not (root / lf).is_file():
            errors.append(f"{name}: licence-file `{lf}` does not exist")
        if not entry.get("source"):
            errors.append(f"{name}: no `source`")
    matched = {f for f in files for p in pats if fnmatch.fnmatchcase(f, p)}
    if not matched:
        errors.append(f"{name}: matches no file (stale entry?)")
    covered |= matched
for f in files:
    if vendored_kind(f) and f not in covered:
        errors.append(f"{f}: a vendored kind of file with no licence in deny/vendored.toml")
for e in errors:
    print(f"check-licences: {e}", file=sys.stderr)
if errors:
    sys.exit(1)
print(f"check-licences: ok ({len(covered)} vendored files, all with a recorded licence)", file=sys.stderr)
PY
}

self_test() {
    local tmp
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' RETURN
    git -C "$tmp" init -q
    mkdir -p "$tmp/deny" "$tmp/console/lib"
    printf 'allow = ["MIT", "Apache-2.0"]\n' >"$tmp/deny/vendored.toml"
    echo 'export const x = 1;' >"$tmp/console/lib/preact.mjs"
    check "$tmp" 2>/dev/null && { echo "self-test: an unlisted .mjs passed" >&2; return 1; }
    cat >>"$tmp/deny/vendored.toml" <<'TOML'
[[vendored]]
paths = ["console/lib/*"]
licence = "MIT"
licence-file = "console/lib/LICENSE"
source = "https://example.invalid/preact"
TOML
    check "$tmp" 2>/dev/null && { echo "self-test: a missing licence file passed" >&2; return 1; }
    echo 'MIT' >"$tmp/console/lib/LICENSE"
    check "$tmp" 2>/dev/null || { echo "self-test: a listed .mjs failed" >&2; return 1; }
    sed -i 's/licence = "MIT"/licence = "GPL-3.0-only"/' "$tmp/deny/vendored.toml"
    check "$tmp" 2>/dev/null && { echo "self-test: a licence outside allow passed" >&2; return 1; }
    sed -i 's/licence = "GPL-3.0-only"/licence = "MIT"/' "$tmp/deny/vendored.toml"
    rm -r "$tmp/console"
    check "$tmp" 2>/dev/null && { echo "self-test: a stale entry passed" >&2; return 1; }
    echo "check-licences: self-test ok (unlisted, no licence file, disallowed licence, stale entry all fail)" >&2
}

case "${1:-}" in
    "") self_test && check "$root" ;;
    --self-test) self_test ;;
    *) echo "usage: scripts/check-licences.sh [--self-test]" >&2; exit 2 ;;
esac
