#!/usr/bin/env bash
# Check the docs, offline, against themselves and against the code, so they cannot drift:
#
#   1. docs/ARCHITECTURE.md is a map: at most 300 lines (the detail lives in docs/design.md,
#      docs/decisions/, docs/TESTING.md and docs/life-of-a-job.md).
#   2. Links. In README.md, DEVELOPERS.md, BENCHMARKS.md, docs/**/*.md and the READMEs of
#      crates/, examples/ and infra/, every relative link (inline, reference-style, or an
#      HTML href/src) points to a file that exists inside the repository, and a `#fragment`
#      into a markdown file names one of its headings (GitHub's anchors). No link and no
#      text there, and no Rust source under crates/ or functions/, points outside the
#      repository (`../shared/`, DESIGN.md): the design is docs/design.md. Absolute URLs
#      (https:, mailto:) are not checked.
#   3. The crate map of docs/ARCHITECTURE.md: every workspace member of
#      `cargo metadata --no-deps` has a row, every crate in a row exists (a member, or a
#      crate of its own at its path, as fuzz/), at the path the row gives, and the row's
#      "workspace crates" are exactly its `[dependencies]` on workspace crates (normal
#      dependencies, not dev or build).
#   4. The DynamoDB paragraph of docs/ARCHITECTURE.md: the key prefixes it names (`GROUP#`,
#      `ENV#`, ...) are exactly the `"<PREFIX>#` string literals of crates/store/src/dynamo
#      (plus `sortie_core::auth::member_index_key`, which builds the membership index's
#      key), and docs/decisions/dynamodb-table.md names every one of them too. Its gsi3 list
#      is exactly the gsi3 partitions the code uses: the string constants of
#      crates/store/src/dynamo named on a line of code that mentions gsi3.
#   5. "the union of N traits (`A`, `B`, ...)" counts and names exactly the supertraits of
#      `Store` in crates/store/src/lib.rs.
#   6. Every test a page names as `` `crates/<...>.rs::<function>` `` (or `tests/`, `functions/`, ...) exists: the file,
#      and a `fn <function>` in it.
#   7. One word per concept: no tracked source, script, template or page uses a retired
#      word or phrase of scripts/banned-words.txt (the rename passes of issue 43), outside
#      the files that line allows (and but for docs/decisions/shape.md, which records the
#      renames); each hit names the word to use instead.
#
# Exits 1 naming each drift, 0 when there is none. Needs bash, cargo and python3 (3.8+).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

python3 - <<'PY'
import json, pathlib, re, subprocess, sys

root = pathlib.Path('.').resolve()
problems = []
found = {}  # what the checks read, for the summary line


def read(path):
    return path.read_text(encoding='utf-8')


def rel(path):
    return str(path.relative_to(root))


# ---------------------------------------------------------------- 1. the map's size

MAX_MAP_LINES = 300
arch_path = root / 'docs' / 'ARCHITECTURE.md'
arch = read(arch_path)
map_lines = arch.count('\n')
if map_lines > MAX_MAP_LINES:
    problems.append(f'docs/ARCHITECTURE.md has {map_lines} lines; the map may have at most '
                    f'{MAX_MAP_LINES} (move detail to docs/decisions/ or docs/TESTING.md)')

# ---------------------------------------------------------------- 2. links and pointers

pages = [root / 'README.md', root / 'DEVELOPERS.md', root / 'BENCHMARKS.md']
pages += sorted((root / 'docs').rglob('*.md'))
for pattern in ('crates/*/README.md', 'examples/*/README.md', 'infra/*/README.md'):
    pages += sorted(root.glob(pattern))
pages = [p for p in pages if p.exists()]

FENCE = re.compile(r'^\s*(```|~~~)')
# [text](target) and [text](target "title"); images too. Not inside code spans.
LINK = re.compile(r'!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REFERENCE = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?')
HTML = re.compile(r'\b(?:href|src)\s*=\s*"([^"]+)"')
CODE_SPAN = re.compile(r'`+[^`]*`+')
OUTSIDE_TEXT = re.compile(r'\.\./shared/|DESIGN\.md')


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


anchors_cache = {}


def anchors(path):
    if path not in anchors_cache:
        seen, names, fenced = {}, set(), False
        for line in read(path).splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                names.add(base if n == 0 else f'{base}-{n}')
                seen[base] = n + 1
        anchors_cache[path] = names
    return anchors_cache[path]


def check_link(page, where, target):
    if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):  # https:, mailto:, ...
        return
    path_part, _, fragment = target.partition('#')
    if not path_part:
        dest = page
    elif path_part.startswith('/'):  # GitHub reads /x from the repository's root
        dest = (root / path_part.lstrip('/')).resolve()
    else:
        dest = (page.parent / path_part).resolve()
    try:
        dest.relative_to(root)
    except ValueError:
        problems.append(f'{where}: link outside the repository: {target} (a clone does not '
                        'have it; link to a file in the repository, such as docs/design.md)')
        return
    if not dest.exists():
        problems.append(f'{where}: link to a missing file: {target}')
        return
    if fragment and dest.suffix == '.md' and dest.is_file():
        if fragment.lower() not in anchors(dest):
            problems.append(f'{where}: no heading for #{fragment} in {rel(dest)}')


links = 0
for page in pages:
    fenced = False
    for number, line in enumerate(read(page).splitlines(), 1):
        where = f'{rel(page)}:{number}'
        m = OUTSIDE_TEXT.search(line)
        if m:
            problems.append(f'{where}: points outside the repository ({m.group(0)}); the '
                            'design is docs/design.md')
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        text = CODE_SPAN.sub('', line)
        targets = [m.group(1) for m in LINK.finditer(text)]
        targets += [m.group(1) for m in HTML.finditer(text)]
        m = REFERENCE.match(text)
        if m:
            targets.append(m.group(1))
        for target in targets:
            links += 1
            check_link(page, where, target)

sources = sorted(root.glob('crates/*/src/**/*.rs')) + sorted(root.glob('functions/*/src/**/*.rs'))
for source in sources:
    for number, line in enumerate(read(source).splitlines(), 1):
        m = OUTSIDE_TEXT.search(line)
        if m:
            problems.append(f'{rel(source)}:{number}: points outside the repository '
                            f'({m.group(0)}); the design is docs/design.md')
found['pages'] = len(pages)
found['links'] = links


# ---------------------------------------------------------------- helpers for the map

def section(text, heading):
    """The text under `## heading` (or any level), up to the next heading."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r'^#{1,6}\s+' + re.escape(heading) + r'\s*$', line):
            body = []
            for rest in lines[i + 1:]:
                if re.match(r'^#{1,6}\s', rest):
                    break
                body.append(rest)
            return '\n'.join(body)
    return None


def cells(row):
    """A markdown table row's cells; a `|` inside a code span does not split."""
    out, cell, code = [], '', False
    for ch in row.strip().strip('|'):
        if ch == '`':
            code = not code
        if ch == '|' and not code:
            out.append(cell.strip())
            cell = ''
        else:
            cell += ch
    out.append(cell.strip())
    return out


def table(text):
    """The rows of the first markdown table in `text`, header and separator left out."""
    rows = [line for line in text.splitlines() if line.lstrip().startswith('|')]
    return [cells(r) for r in rows[2:]]


def ticked(text):
    return re.findall(r'`([^`]+)`', text)


# ---------------------------------------------------------------- 3. the crate map

def metadata(manifest=None):
    command = ['cargo', 'metadata', '--no-deps', '--format-version', '1', '--offline']
    if manifest:
        command += ['--manifest-path', str(manifest)]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        problems.append('cargo is not on PATH: the crate map cannot be checked')
        return None
    if result.returncode != 0:
        problems.append(f'`{" ".join(command)}` failed: {result.stderr.strip()[:500]}')
        return None
    return json.loads(result.stdout)


meta = metadata()
members = {}  # name -> (path relative to the root, {workspace crates it depends on})
if meta:
    ids = set(meta['workspace_members'])
    packages = [p for p in meta['packages'] if p['id'] in ids]
    names = {p['name'] for p in packages}
    for p in packages:
        path = pathlib.Path(p['manifest_path']).parent.resolve()
        deps = {d['name'] for d in p['dependencies'] if d['kind'] is None and d['name'] in names}
        members[p['name']] = (rel(path), deps)

crate_map = section(arch, 'Crate map')
if crate_map is None:
    problems.append('docs/ARCHITECTURE.md has no "Crate map" section')
elif meta:
    header = cells([l for l in crate_map.splitlines() if l.lstrip().startswith('|')][0])
    try:
        col_crate, col_path = header.index('crate'), header.index('path')
        col_deps = header.index('workspace crates')
    except ValueError:
        problems.append('docs/ARCHITECTURE.md crate map: the table needs the columns "crate", '
                        f'"path" and "workspace crates"; it has {header}')
        col_crate = None
    rows_seen = {}
    for row in table(crate_map) if col_crate is not None else []:
        crates = ticked(row[col_crate])
        path_cell = ticked(row[col_path])
        row_path = path_cell[0].rstrip('/') if path_cell else ''
        listed = set()
        for token in re.split(r'[,;]', row[col_deps].replace('`', '')):
            token = token.strip()
            if token in ('', '—', '-', 'none'):
                continue
            name = f'sortie-{token}' if f'sortie-{token}' in members else token
            if name not in members:
                problems.append(f'docs/ARCHITECTURE.md crate map, row {", ".join(crates)}: '
                                f'"{token}" in "workspace crates" is not a workspace crate')
                continue
            listed.add(name)
        for crate in crates:
            if crate in rows_seen:
                problems.append(f'docs/ARCHITECTURE.md crate map: {crate} has two rows')
            rows_seen[crate] = row_path
            expected_path = row_path.replace('<name>', crate)
            if crate in members:
                path, deps = members[crate]
            else:
                manifest = root / expected_path / 'Cargo.toml'
                own = metadata(manifest) if expected_path and manifest.exists() else None
                package = next((p for p in own['packages'] if p['name'] == crate), None) if own else None
                if package is None:
                    problems.append(f'docs/ARCHITECTURE.md crate map: {crate} is not a workspace '
                                    f'member and there is no crate of that name at `{expected_path}`')
                    continue
                path = expected_path
                deps = {d['name'] for d in package['dependencies']
                        if d['kind'] is None and d['name'] in members}
            if path != expected_path:
                problems.append(f'docs/ARCHITECTURE.md crate map: {crate} is at `{path}`, '
                                f'the row says `{expected_path}`')
            if deps != listed:
                missing = ', '.join(sorted(deps - listed)) or 'nothing'
                extra = ', '.join(sorted(listed - deps)) or 'nothing'
                problems.append(f'docs/ARCHITECTURE.md crate map: {crate} depends on workspace '
                                f'crates {sorted(deps)} per cargo metadata; the row misses '
                                f'{missing} and lists {extra} it does not depend on')
    for crate, (path, _) in sorted(members.items()):
        if crate not in rows_seen:
            problems.append(f'docs/ARCHITECTURE.md crate map: workspace member {crate} '
                            f'(`{path}`) has no row')
    found['crates'] = len(rows_seen)


# ---------------------------------------------------------------- 4. the DynamoDB table

def rust_code(src):
    """`src` with comments blanked (newlines kept), and its string literals as (line, text)."""
    code, strings = [], []
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            code.append(' ' * (j - i))
            i = j
        elif src.startswith('/*', i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith('/*', j):
                    depth, j = depth + 1, j + 2
                elif src.startswith('*/', j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            chunk = src[i:j]
            code.append(re.sub(r'[^\n]', ' ', chunk))
            line += chunk.count('\n')
            i = j
        elif c == 'r' and re.match(r'r#*"', src[i:i + 20]) and not re.match(r'\w', src[i - 1:i]):
            hashes = len(re.match(r'r(#*)"', src[i:]).group(1))
            end = src.find('"' + '#' * hashes, i + 2 + hashes)
            end = n if end < 0 else end
            chunk = src[i:end + 1 + hashes]
            strings.append((line, src[i + 2 + hashes:end]))
            code.append(chunk)
            line += chunk.count('\n')
            i += len(chunk)
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            chunk = src[i:j + 1]
            strings.append((line, chunk[1:-1]))
            code.append(chunk)
            line += chunk.count('\n')
            i = j + 1
        elif c == "'":  # a char literal ('"', '\'', '\u{..}') or a lifetime
            if src.startswith('\\', i + 1):
                j = src.find("'", i + 3)
                j = i if j < 0 else j
            elif i + 2 < n and src[i + 2] == "'":
                j = i + 2
            else:
                j = i
            code.append(src[i:j + 1])
            i = j + 1
        else:
            code.append(c)
            line += c == '\n'
            i += 1
    return ''.join(code), strings


PREFIX = re.compile(r'(?<![A-Za-z0-9_])([A-Z][A-Z0-9_]*)#')
dynamo_files = sorted((root / 'crates' / 'store' / 'src' / 'dynamo').rglob('*.rs'))
code_prefixes, constants, parsed = set(), {}, []
for path in dynamo_files:
    code, strings = rust_code(read(path))
    parsed.append((path, code, strings))
    for _, text in strings:
        code_prefixes.update(PREFIX.findall(text))
    for name, value in re.findall(r'\bconst\s+([A-Z][A-Z0-9_]*)\s*:\s*&(?:\'static\s+)?str\s*=\s*"([^"]*)"', code):
        constants[name] = value
auth = read(root / 'crates' / 'core' / 'src' / 'auth.rs')
m = re.search(r'fn member_index_key\b.*?\n\}', auth, re.S)
if m:
    code_prefixes.update(PREFIX.findall(''.join(t for _, t in rust_code(m.group(0))[1])))
else:
    problems.append('crates/core/src/auth.rs has no `member_index_key`; update '
                    'scripts/check-docs.sh where it reads the table\'s key builders')

code_gsi3 = set()
for path, code, strings in parsed:
    for text in code.splitlines():
        if 'gsi3' not in text:
            continue
        for name in re.findall(r'\b[A-Z][A-Z0-9_]*\b', text):
            if name in constants:
                code_gsi3.add(constants[name])
        for literal in re.findall(r'"([A-Z][A-Z_]*)"', text):
            code_gsi3.add(literal)

table_text = section(arch, 'The DynamoDB table')
if table_text is None:
    problems.append('docs/ARCHITECTURE.md has no "The DynamoDB table" section')
else:
    doc_prefixes = {p for token in ticked(table_text) for p in PREFIX.findall(token)}
    for p in sorted(code_prefixes - doc_prefixes):
        problems.append(f'docs/ARCHITECTURE.md, the DynamoDB table: the code writes keys '
                        f'starting `{p}#` (crates/store/src/dynamo, or member_index_key) and the '
                        'paragraph does not name them')
    for p in sorted(doc_prefixes - code_prefixes):
        problems.append(f'docs/ARCHITECTURE.md, the DynamoDB table: the paragraph names `{p}#`, '
                        'a key prefix no code in crates/store/src/dynamo writes')
    doc_gsi3 = set()
    for m in re.finditer(r'gsi3\b([^;.]*)', table_text):
        doc_gsi3.update(t for t in ticked(m.group(1)) if re.fullmatch(r'[A-Z][A-Z_]*', t))
    if not doc_gsi3:
        problems.append('docs/ARCHITECTURE.md, the DynamoDB table: no gsi3 list '
                        '("gsi3 ... (`PENDING`, ...);") found')
    for p in sorted(code_gsi3 - doc_gsi3):
        problems.append(f'docs/ARCHITECTURE.md, the DynamoDB table: the gsi3 list misses '
                        f'`{p}`, a sparse list the code uses')
    for p in sorted(doc_gsi3 - code_gsi3):
        problems.append(f'docs/ARCHITECTURE.md, the DynamoDB table: the gsi3 list names '
                        f'`{p}`, which no code in crates/store/src/dynamo uses on gsi3')
    found['prefixes'] = len(code_prefixes)
    found['gsi3'] = ', '.join(sorted(code_gsi3))
details = root / 'docs' / 'decisions' / 'dynamodb-table.md'
detail_prefixes = {p for token in ticked(read(details)) for p in PREFIX.findall(token)}
for p in sorted(code_prefixes - detail_prefixes):
    problems.append(f'docs/decisions/dynamodb-table.md: no item or index key starting `{p}#`, '
                    'which the code writes (crates/store/src/dynamo, or member_index_key)')

# ---------------------------------------------------------------- 5. Store's traits

lib = read(root / 'crates' / 'store' / 'src' / 'lib.rs')
m = re.search(r'pub trait Store\s*:([^{]*)\{', lib)
store_traits = [t.strip() for t in m.group(1).split('+')] if m else []
store_traits = [t for t in store_traits if re.fullmatch(r'[A-Za-z_]\w*', t)]
if not store_traits:
    problems.append('crates/store/src/lib.rs: `pub trait Store: A + B + ... {}` not found; '
                    'update scripts/check-docs.sh')
NUMBERS = {w: i for i, w in enumerate(
    'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen '
    'fifteen sixteen seventeen eighteen nineteen twenty'.split())}
union_seen = 0
for page in pages:
    text = read(page)
    for m in re.finditer(r'the union of (\w+) traits\s*\(([^)]*)\)', text):
        union_seen += page == arch_path
        where = f'{rel(page)}:{text.count(chr(10), 0, m.start()) + 1}'
        word = m.group(1).lower()
        count = int(word) if word.isdigit() else NUMBERS.get(word)
        if count != len(store_traits):
            problems.append(f'{where}: "the union of {m.group(1)} traits", but `Store` in '
                            f'crates/store/src/lib.rs has {len(store_traits)} supertraits')
        listed = set(ticked(m.group(2)))
        if store_traits and listed != set(store_traits):
            problems.append(f'{where}: the union names {sorted(listed)}, `Store` is '
                            f'{" + ".join(store_traits)}')
if union_seen == 0:
    problems.append('docs/ARCHITECTURE.md no longer says what `Store` is ("the union of N '
                    'traits (`RunnerStore`, ...)")')

# ---------------------------------------------------------------- 6. the tests pages name

TEST = re.compile(r'`((?:crates|functions|bench|fuzz|tests)/[^`\s]+\.rs)::([A-Za-z_]\w*)`')
named = 0
for page in pages:
    text = read(page)
    for m in TEST.finditer(text):
        named += 1
        where = f'{rel(page)}:{text.count(chr(10), 0, m.start()) + 1}'
        path, function = root / m.group(1), m.group(2)
        if not path.is_file():
            problems.append(f'{where}: names a test in {m.group(1)}, which does not exist')
        elif not re.search(r'\bfn\s+' + re.escape(function) + r'\b', read(path)):
            problems.append(f'{where}: names the test {function}, which {m.group(1)} does not have')
found['tests'] = named

# ---------------------------------------------------------------- 7. retired words

import fnmatch
banned = []
for number, line in enumerate(read(root / 'scripts' / 'banned-words.txt').splitlines(), 1):
    if not line.strip() or line.startswith('#'):
        continue
    fields = line.split('\t')
    if len(fields) != 3:
        problems.append(f'scripts/banned-words.txt:{number}: needs three tab-separated fields')
        continue
    pattern, instead, allowed = fields
    banned.append((re.compile(pattern), instead,
                   [] if allowed.strip() == '-' else [g.strip() for g in allowed.split(',')]))
tracked = subprocess.run(['git', 'ls-files', '-z'], capture_output=True, check=True,
                         cwd=root).stdout.decode().split('\0')
SCANNED = ('.rs', '.md', '.py', '.sh', '.yaml', '.yml', '.js', '.mjs', '.toml')
scanned = 0
for name in tracked:
    if not name or not (name.endswith(SCANNED) or name == 'Makefile'):
        continue
    # The list itself, and the page that records the renames (old beside new).
    if name in ('scripts/banned-words.txt', 'docs/decisions/shape.md') \
            or '/target/' in name or name.startswith('target/'):
        continue
    path = root / name
    if not path.is_file():
        continue
    scanned += 1
    try:
        text = read(path)
    except UnicodeDecodeError:
        continue
    for regex, instead, allowed in banned:
        if any(fnmatch.fnmatch(name, g) for g in allowed):
            continue
        for m in regex.finditer(text):
            line = text.count('\n', 0, m.start()) + 1
            problems.append(f'{name}:{line}: `{m.group(0)}` is a retired word; say {instead}')
found['scanned'] = scanned

if problems:
    print('check-docs: ' + str(len(problems)) + ' problem(s)', file=sys.stderr)
    for p in problems:
        print('  ' + p, file=sys.stderr)
    sys.exit(1)
print(f'check-docs: ARCHITECTURE.md {map_lines} lines; {found["links"]} links in '
      f'{found["pages"]} pages resolve inside the repository; the crate map matches '
      f'{found.get("crates", 0)} crates; {found.get("prefixes", 0)} key prefixes and gsi3 '
      f'({found.get("gsi3", "")}) match the store; Store has {len(store_traits)} traits; '
      f'{found["tests"]} named tests exist; {found["scanned"]} files use no retired word')
PY
