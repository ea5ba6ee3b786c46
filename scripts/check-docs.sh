#!/usr/bin/env bash
# Check the docs' shape, offline:
#
#   docs/ARCHITECTURE.md is a map: at most 300 lines (the detail lives in docs/decisions/,
#   docs/TESTING.md and docs/life-of-a-job.md).
#   Every relative markdown link in README.md, BENCHMARKS.md and docs/**/*.md points to a
#   file that exists, and a `#fragment` into a markdown file names one of its headings
#   (GitHub's anchors). Links that leave the repository (DESIGN.md sits beside it) and
#   absolute URLs are not checked.
#
# Exits 1 naming each problem, 0 when there is none. Needs bash and python3 only.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

python3 - <<'PY'
import pathlib, re, sys

root = pathlib.Path('.').resolve()
problems = []

MAX_MAP_LINES = 300
arch = root / 'docs' / 'ARCHITECTURE.md'
lines = arch.read_text(encoding='utf-8').count('\n')
if lines > MAX_MAP_LINES:
    problems.append(f'docs/ARCHITECTURE.md has {lines} lines; the map may have at most '
                    f'{MAX_MAP_LINES} (move detail to docs/decisions/ or docs/TESTING.md)')

pages = [root / 'README.md', root / 'BENCHMARKS.md'] + sorted((root / 'docs').rglob('*.md'))
pages = [p for p in pages if p.exists()]

FENCE = re.compile(r'^(```|~~~)')
# [text](target) and [text](target "title"); images too. Not inside code spans.
LINK = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
CODE_SPAN = re.compile(r'`+[^`]*`+')


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


anchors_cache = {}


def anchors(path):
    if path not in anchors_cache:
        seen, found, fenced = {}, set(), False
        for line in path.read_text(encoding='utf-8').splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                found.add(base if n == 0 else f'{base}-{n}')
                seen[base] = n + 1
        anchors_cache[path] = found
    return anchors_cache[path]


for page in pages:
    fenced = False
    for number, line in enumerate(page.read_text(encoding='utf-8').splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in LINK.finditer(CODE_SPAN.sub('', line)):
            target = m.group(1)
            if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):  # https:, mailto:, ...
                continue
            path_part, _, fragment = target.partition('#')
            where = f'{page.relative_to(root)}:{number}'
            dest = page if not path_part else (page.parent / path_part).resolve()
            try:
                dest.relative_to(root)
            except ValueError:
                continue  # outside the repository (e.g. ../shared/DESIGN.md)
            if not dest.exists():
                problems.append(f'{where}: link to a missing file: {target}')
                continue
            if fragment and dest.suffix == '.md' and dest.is_file():
                if fragment.lower() not in anchors(dest):
                    problems.append(f'{where}: no heading for #{fragment} in '
                                    f'{dest.relative_to(root)}')

if problems:
    print('check-docs: ' + str(len(problems)) + ' problem(s)', file=sys.stderr)
    for p in problems:
        print('  ' + p, file=sys.stderr)
    sys.exit(1)
print(f'check-docs: ARCHITECTURE.md {lines} lines; links in {len(pages)} pages resolve')
PY
