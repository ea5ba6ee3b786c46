"""Shared machinery for driving `sortie dev` on the moto of scripts/with-moto.sh:
scripts/bench-e2e.py (end-to-end figures) and scripts/soak.py (1,000 jobs under chaos).

- `Api`: the HTTP API with the development token;
- `start_dev`: starts `sortie dev` on fresh resources and waits for its ready file;
- moto's process: CPU seconds and resident memory (`MotoProcess`);
- the AWS calls `sortie dev` made for each job, as it saw them (`aws_waits_by_job`);
- moto's own handling time per request (`moto_events`, `moto_ops`), from the timing
  wrapper of scripts/moto_server.py (patch 5), and `moto_share`: how much of a time
  window moto spent serving requests that name a job (the rest is Sortie's).
"""

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TERMINAL = {"succeeded", "failed", "canceled", "timed_out"}


def parse_time(text):
    """RFC 3339 with up to nanoseconds, as epoch seconds (Python takes microseconds)."""
    text = text.replace("Z", "+00:00")
    if "." in text:
        head, rest = text.split(".", 1)
        frac, zone = rest[: rest.index("+")], rest[rest.index("+"):]
        text = f"{head}.{frac[:6].ljust(6, '0')}{zone}"
    return dt.datetime.fromisoformat(text).timestamp()


def pct(values, p):
    """The p-th percentile (nearest rank); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


class Api:
    """The API of `sortie dev`, with its development token."""

    def __init__(self, url, token):
        self.url, self.token = url, token

    def call(self, method, path, body=None, attempts=1):
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(attempts):
            req = urllib.request.Request(self.url + path, data=data, method=method)
            req.add_header("Authorization", f"Bearer {self.token}")
            if data is not None:
                req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    text = r.read()
                    return json.loads(text) if text else None
            except (OSError, urllib.error.URLError):
                if attempt + 1 == attempts:
                    raise
                time.sleep(0.5)


def pinned_terraform():
    """The runner's Terraform for a script's `sortie dev`, as its `SORTIE_TERRAFORM` (the
    operator's pin): this process's own when set, else Terraform 0.11.11
    (`SORTIE_TEST_TERRAFORM`, set by scripts/with-moto.sh), which the scripts' checks were
    written against; none when neither is set (a job then runs the newest binary there)."""
    for name in ("SORTIE_TERRAFORM", "SORTIE_TEST_TERRAFORM"):
        if os.environ.get(name):
            return {"SORTIE_TERRAFORM": os.environ[name]}
    return {}


def start_dev(sortie, work, stamp, runner, log_name="dev.log", env=None, timeout=60, extra=()):
    """Starts `sortie dev` on the table/queue/bucket/bus named by `stamp`, with `runner`
    as the runner binary (and `extra` arguments); returns (process, Api) once its ready
    file is written."""
    ready = os.path.join(work, "ready.json")
    if os.path.exists(ready):
        os.remove(ready)
    log = open(os.path.join(work, log_name), "a")
    dev = subprocess.Popen(
        [sortie, "dev", "--table", f"bench-{stamp}", "--queue", f"bench-jobs-{stamp}",
         "--bucket", f"bench-artifacts-{stamp}", "--bus", f"bench-{stamp}",
         "--work-dir", work, "--runner", runner, "--ready-file", ready, *extra],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env={**os.environ, **pinned_terraform(), **(env or {})})
    deadline = time.time() + timeout
    while not (os.path.exists(ready) and os.path.getsize(ready) > 0):
        if time.time() > deadline or dev.poll() is not None:
            sys.exit(f"sortie dev did not start; see {log.name}")
        time.sleep(0.1)
    with open(ready) as f:
        r = json.load(f)
    return dev, Api(r["url"], r["token"])


def stop_dev(dev):
    """Stops a `sortie dev` that start_dev started: SIGTERM, then SIGKILL after 10 s."""
    dev.terminate()
    try:
        dev.wait(timeout=10)
    except subprocess.TimeoutExpired:
        dev.kill()


class MotoProcess:
    """The moto server listening on `endpoint`'s port: CPU seconds and peak RSS, sampled
    every half second while `sampling`."""

    def __init__(self, endpoint):
        self.endpoint = endpoint.rstrip("/")
        port = self.endpoint.rsplit(":", 1)[1].encode()
        self.pids = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if any(b"moto_server" in a for a in args) and port in args:
                self.pids.append(pid)
        self.peak_rss_mib = 0.0
        self._stop = threading.Event()
        self._thread = None

    def cpu_seconds(self):
        total = 0.0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except OSError:
                continue
        return total

    def rss_mib(self):
        total = 0.0
        for pid in self.pids:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) / 1024
            except OSError:
                continue
        return total

    def start_sampling(self):
        def sample():
            while not self._stop.wait(0.5):
                self.peak_rss_mib = max(self.peak_rss_mib, self.rss_mib())
        self.peak_rss_mib = self.rss_mib()
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()

    def stop_sampling(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        self.peak_rss_mib = max(self.peak_rss_mib, self.rss_mib())


def _get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return json.loads(r.read())


def moto_ops(endpoint):
    """moto's requests so far by operation: {op: {"count", "total_ms"}} (patch 5)."""
    return _get(endpoint.rstrip("/") + "/_sortie/moto-timing")["ops"]


def moto_reset(endpoint):
    req = urllib.request.Request(endpoint.rstrip("/") + "/_sortie/moto-timing/reset", method="POST")
    urllib.request.urlopen(req, timeout=30).read()


def moto_events(endpoint, since):
    """Every request moto served since `since`: (start, seconds, op, job ids named)."""
    return _get(endpoint.rstrip("/") + f"/_sortie/moto-timing/events?since={since}")["events"]


def intervals_by_job(events, ids):
    """Each job's moto request intervals [(start, end)], sorted."""
    wanted = set(ids)
    by_job = {}
    for start, took, _op, named in events:
        for job in named:
            if job in wanted:
                by_job.setdefault(job, []).append((start, start + took))
    for spans in by_job.values():
        spans.sort()
    return by_job


def aws_waits_by_job(log_path, ids):
    """Each job's AWS calls as `sortie dev` saw them, [(start, end, op)] sorted: the `aws call`
    lines its interceptor logs at debug (RUST_LOG=info,sortie_wiring::job_header=debug),
    from before a request is built to its answer, for the job the work was for."""
    wanted = set(ids)
    by_job = {}
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                if '"aws call"' not in line:
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                job = e.get("job_id")
                if job in wanted:
                    began = float(e["began"])
                    by_job.setdefault(job, []).append(
                        (began, began + float(e["took_ms"]) / 1000, e.get("op", "?")))
    except OSError:
        return {}
    for spans in by_job.values():
        spans.sort()
    return by_job


def moto_share(spans, begin, end):
    """Seconds of [begin, end] covered by the union of `spans` (moto serving a request
    for the job); the rest of the window is Sortie's (and the loopback's)."""
    covered, cursor = 0.0, begin
    for s, e in spans:
        s, e = max(s, cursor), min(e, end)
        if e > s:
            covered += e - s
            cursor = e
        if cursor >= end:
            break
    return covered
