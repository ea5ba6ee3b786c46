#!/usr/bin/env python3
"""Summarises a schemathesis NDJSON report (scripts/schemathesis.sh writes it).

    schemathesis-summary.py REPORT.ndjson [--detail]

Prints one line: requests, 5xx answers, failures per check, then, with --detail,
the answers per operation and status, and each distinct failure (operation,
check, status, message, one example request).
"""
import base64
import collections
import json
import sys

path = sys.argv[1]
detail = "--detail" in sys.argv[2:]
requests = 0
five = 0
statuses = collections.Counter()
per_op = collections.defaultdict(collections.Counter)
fails = collections.Counter()
distinct = {}


def body_text(b):
    if not b:
        return ""
    if isinstance(b, dict) and "$base64" in b:
        return base64.b64decode(b["$base64"]).decode("utf-8", "replace")
    return str(b)


for line in open(path, encoding="utf-8"):
    event = json.loads(line)
    fin = event.get("ScenarioFinished")
    if not fin:
        continue
    rec = fin.get("recorder") or {}
    label = rec.get("label", "?")
    interactions = rec.get("interactions") or {}
    for case_id, inter in interactions.items():
        resp = inter.get("response")
        if not resp:
            continue
        requests += 1
        code = resp.get("status_code")
        statuses[code] += 1
        per_op[label][code] += 1
        if code and code >= 500:
            five += 1
    for case_id, checks in (rec.get("checks") or {}).items():
        for c in checks:
            if c.get("status") != "failure":
                continue
            fails[c["name"]] += 1
            inter = interactions.get(case_id) or {}
            resp = inter.get("response") or {}
            req = inter.get("request") or {}
            failure = c.get("failure_info") or {}
            msg = (failure.get("failure") or {}).get("title") or c.get("message") or ""
            key = (label, c["name"], resp.get("status_code"), msg)
            if key not in distinct:
                distinct[key] = (req.get("method"), req.get("uri"), body_text(req.get("body"))[:300],
                                 body_text(resp.get("content"))[:300], failure)

line = f"schemathesis: requests={requests} 5xx={five} failures=" + (
    ",".join(f"{k}:{v}" for k, v in sorted(fails.items())) or "none")
print(line)
if detail:
    print("\nanswers per operation:")
    for label in sorted(per_op):
        print(f"  {label}: " + " ".join(f"{k}x{v}" for k, v in sorted(per_op[label].items(), key=lambda kv: str(kv[0]))))
    print(f"\ndistinct failures: {len(distinct)}")
    for (label, check, code, msg), (method, uri, body, resp, failure) in sorted(distinct.items(), key=str):
        print(f"- {label} [{check}] status {code}: {msg}")
        print(f"    request: {method} {uri} body={body!r}")
        print(f"    answer: {resp!r}")
