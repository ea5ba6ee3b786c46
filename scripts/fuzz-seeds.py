#!/usr/bin/env python3
"""Write the fuzz targets' seed corpora into fuzz/corpus/<target>/seed-*.

The seeds are committed; run this again (python3 scripts/fuzz-seeds.py) after
adding tests or sample events to pick up their documents. It gathers:

  runner_config    the runner documents of crates/core/tests/it/parsing.rs and
                   the API tests, plus hand-written edge cases
  rule_body        rule bodies of crates/api/tests/it/api.rs, plus edge cases
  environment_body environment bodies of crates/api/tests/it/api.rs, plus edge cases
  job_body         job bodies of crates/core/tests and crates/api/tests, plus edge cases
  ecs_event        the `detail` of every events/ecs-*.json, plus edge cases

Seeds are named by content hash, so re-running is idempotent; inputs the fuzzer
found (fuzz/corpus/<target>/<sha1>) are left alone, and fuzz/regressions/ holds
crashing inputs that were fixed.
"""
import glob
import hashlib
import json
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(root)

RAW = re.compile(r'r#"(.*?)"#', re.S)
PLAIN_PARSE = re.compile(r'(?:RunnerSpec|JobRequest|RunnerRule)::parse\(\s*"((?:[^"\\]|\\.)*)"', re.S)


def rust_strings(path):
    text = open(path, encoding="utf-8").read()
    out = [m.group(1) for m in RAW.finditer(text)]
    for m in PLAIN_PARSE.finditer(text):
        out.append(bytes(m.group(1), "utf-8").decode("unicode_escape"))
    return out


def classify(s):
    if "runner_configuration" in s or "state_storage_configuration" in s:
        return "runner_config"
    if '"operation"' in s or "operation:" in s:
        return "job_body"
    if "runner_id" in s:
        return "rule_body"
    if '"env_type"' in s or '"labels"' in s or '"tags"' in s or '"name"' in s:
        return "environment_body"
    return None


seeds = {t: [] for t in ["runner_config", "rule_body", "environment_body", "job_body", "ecs_event"]}

for path in sorted(glob.glob("crates/core/tests/it/*.rs") + glob.glob("crates/api/tests/it/*.rs")):
    for s in rust_strings(path):
        t = classify(s)
        if t:
            seeds[t].append(s)

seeds["runner_config"] += [
    "runner_configuration: {type: local}\nstate_storage_configuration: {type: local, directory: /tmp/state}",
    '{"runner_configuration":{"type":"local"},"state_storage_configuration":{"type":"s3","bucket":"sortie-state","region":"us-east-1"}}',
    "runner_configuration: {type: local, timeout_seconds: 60}\nstate_storage_configuration: {type: local, directory: ''}",
    "runner_configuration: {type: local, timeout_seconds: -1}\nstate_storage_configuration: {type: local}",
    "runner_configuration: {type: local, timeout_seconds: 1e400}\nstate_storage_configuration: {type: local}",
    "runner_configuration: {type: ecs-fargate, cpu: 4096, memory: 30720}\nstate_storage_configuration: {type: s3}",
    "runner_configuration: &a {type: local}\nstate_storage_configuration: *a",
    "runner_configuration: !!binary aGVsbG8=\n",
    "? [a, b]\n: c\n",
    "runner_configuration:\n  type: eks\n  job: {pod_template: \"{{{\"}\n",
    "---\n...\n",
    "[]",
    "null",
    "~",
    "\"\u0000\"",
    "description: \"\\uD800\"\n",
    "{" * 64 + "}" * 64,
    "- " * 64,
]
seeds["rule_body"] += [
    '{"id":"default","runner_id":"acme/local"}',
    '{"id":"prod","scope":"acme/payments","runner_id":"acme/payments/team","criteria":{"env_type":"production","env_path":"acme/**/prod*","labels":{"tier":"1"},"tags":["pci"]},"priority":7}',
    "id: glob\nrunner_id: shared\ncriteria: {env_path: '[!a-'}\n",
    "id: glob\nrunner_id: shared\ncriteria: {env_path: '***/**/[[]'}\n",
    "id: p\nrunner_id: shared\npriority: 2147483648\n",
    "id: p\nrunner_id: shared\npriority: -2147483649\n",
    "id: p\nrunner_id: shared\npriority: 1.5\n",
    "id: p\nscope: ''\nrunner_id: shared\n",
    "id: p\nscope: acme/a/b/c/d/e/f/g/h\nrunner_id: acme/r\n",
    "id: p\nrunner_id: acme/payments/../x\n",
    "id: P\nrunner_id: shared\ncriteria: {env_type: '  '}\n",
    "id: r1\nrunner_id: shared\ncriteria: {labels: {'': ''}, tags: ['']}\n",
]
seeds["environment_body"] += [
    '{"name":"prod","env_type":"production","labels":{"tier":"gold"},"tags":["pci"]}',
    '{"name":"hello","env_type":"development"}',
    '{"env_type":"production"}',
    '{"labels":{},"tags":[]}',
    '{"tags":["a","a"]}',
    "name: ''\nenv_type: x\n",
    "name: a-very-long-name-" + "x" * 80 + "\nenv_type: x\n",
    "name: prod\nenv_type: ' '\n",
    "name: prod/../x\nenv_type: dev\n",
    "name: Prod\nenv_type: dev\nlabels: {a: 1}\n",
    "name: prod\nenv_type: dev\nlabels: [a]\ntags: {a: b}\n",
    "env_type: null\nlabels: null\ntags: null\n",
    "name: 7\nenv_type: true\n",
]
seeds["job_body"] += [
    '{"operation":"plan","source":{"type":"inline"},"files":{"main.tf":"output \\"x\\" { value = 1 }"},"variables":{"n":1,"s":"x","l":[1,2],"m":{"a":null}}}',
    '{"operation":"apply","source":{"type":"s3","bucket":"b","key":"k.tar.gz","sha256":"' + "a" * 64 + '","path":"stacks/app"}}',
    '{"operation":"destroy","source":{"type":"git","url":"git@github.com:acme/infra.git","credentials_secret":"arn:aws:secretsmanager:us-east-1:123456789012:secret:git-AbCdEf"}}',
    '{"operation":"plan","source":{"type":"git","url":"file:///tmp/repo","path":"../.."}}',
    '{"operation":"plan","source":{"type":"ftp"}}',
    '{"operation":"plan","source":{}}',
    '{"operation":"plan","files":{"a/./b":"", "a//b":"", "C:\\\\x":"", "\\u0000":""}}',
    '{"operation":"plan","files":{"main.tf":""},"variables":{"x":1e308,"y":-0.0,"z":18446744073709551616}}',
    "operation: plan\nfiles: {main.tf: ''}\nvariables: {x: .nan, y: .inf}\n",
    "operation: plan\nfiles: {main.tf: ''}\nsecret_refs: {SORTIE_X: 'arn:aws:ssm:us-east-1:123456789012:parameter/x'}\n",
    "operation: [plan]\n",
    "operation: plan\nsource: inline\n",
]
for path in sorted(glob.glob("events/ecs-*.json")):
    event = json.load(open(path, encoding="utf-8"))
    seeds["ecs_event"].append(json.dumps(event.get("detail", event), indent=1))
seeds["ecs_event"] += [
    "{}",
    '{"lastStatus":"STOPPED","stopCode":"EssentialContainerExited","containers":[{"name":"runner","exitCode":0}]}',
    '{"lastStatus":"STOPPED","stoppedReason":"sortie: canceled by alice","containers":[]}',
    '{"lastStatus":"STOPPED","stoppedReason":"sortie: timed out after 60s"}',
    '{"lastStatus":"STOPPED","stopCode":"SpotInterruption","containers":[{"name":"a","exitCode":1},{"name":"b","exitCode":2}]}',
    '{"lastStatus":"STOPPED","containers":[{"name":"runner","exitCode":-2147483648,"reason":"OOMKilled"}]}',
    '{"lastStatus":"STOPPED","containers":[{"name":"runner","exitCode":2147483648}]}',
    '{"taskArn":null,"containers":null,"stopCode":7}',
    '{"containers":[{"name":"runner","exitCode":137,"reason":""}],"stoppedReason":""}',
]

written = 0
for target, items in seeds.items():
    d = os.path.join("fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    for s in items:
        data = s.encode("utf-8", "surrogatepass")
        name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
        p = os.path.join(d, name)
        if not os.path.exists(p):
            open(p, "wb").write(data)
            written += 1
    print(f"{target}: {len(set(items))} seeds", file=sys.stderr)
print(f"wrote {written} new seed files", file=sys.stderr)
