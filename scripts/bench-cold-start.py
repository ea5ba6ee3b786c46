"""Cold start of the four functions, side by side with a bare Rust probe and boto3.

    .tools/venv/bin/python scripts/bench-cold-start.py [--runs 20] [--no-build] [--json FILE]

Builds the four functions and `cold-start-probe` (bench/cold-start-probe: a bare
`lambda_runtime` function that calls `aws_config::load_from_env`, and nothing else) the
way they are deployed: `cargo lambda build --release --output-format zip`, for this
machine's architecture. Each zip is unpacked and its `bootstrap` is started, with the
environment Lambda gives a function and nothing else, against a Lambda Runtime API double
on loopback (one per start, so no start waits on another). A cold start is the time from
the process's spawn to its first `GET /2018-06-01/runtime/invocation/next`: everything
the function does at init. Lambda bills and reports that span as Init Duration. Its RSS
is read from /proc at that request. The process is then killed.

The boto3 side is bench/cold_start_boto3.py, run by this venv's python: a handler that
creates the same six clients and asks for its first invocation.

The candidates take turns, in a new random order in each round, so that a change in the
machine's load falls on all of them alike. The script prints medians of `--runs` starts,
p90, the ratio of each median to the probe's, the RSS and the zip's size, as a Markdown
table.

No request leaves the machine: no function makes an AWS call before its first event.
"""

import argparse
import http.server
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUNCTIONS = ["api", "dispatch", "task-events", "sweeper"]
PROBE = "cold-start-probe"
BOTO3 = "boto3 handler"

# What each function's template gives it (infra/template.yaml), with stand-in values: no
# function reads these at init beyond checking that they are set.
SORTIE_ENV = {
    "SORTIE_TABLE": "sortie",
    "SORTIE_JOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/sortie-jobs",
    "SORTIE_BUCKET": "sortie-artifacts",
    "SORTIE_API_URL": "https://api.sortie.example",
    "SORTIE_BUS_NAME": "sortie",
}


def lambda_env(name, runtime_api, task_root):
    """The environment Lambda gives a function (its reserved variables), and Sortie's."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "AWS_LAMBDA_RUNTIME_API": runtime_api,
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/11/23/[$LATEST]0123456789abcdef",
        "AWS_EXECUTION_ENV": "AWS_Lambda_provided.al2023",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "ASIAEXAMPLEEXAMPLE00",
        "AWS_SECRET_ACCESS_KEY": "example-secret-key-for-the-benchmark-only",
        "AWS_SESSION_TOKEN": "example-session-token",
        "LAMBDA_TASK_ROOT": task_root,
        "LAMBDA_RUNTIME_DIR": task_root,
    }
    env.update(SORTIE_ENV)
    return env


class RuntimeApi(http.server.ThreadingHTTPServer):
    """One start's Lambda Runtime API: notes the first `next` request, and holds it."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), RuntimeHandler)
        self.pid = None
        self.asked_at = None
        self.rss_kib = None
        self.init_error = None
        self.asked = threading.Event()
        self.done = threading.Event()

    @property
    def address(self):
        return f"127.0.0.1:{self.server_address[1]}"


class RuntimeHandler(http.server.BaseHTTPRequestHandler):
    """GET .../invocation/next is the end of init; POST .../init/error is a failed init."""

    def do_GET(self):
        server = self.server
        if self.path.endswith("/runtime/invocation/next") and not server.asked.is_set():
            server.asked_at = time.perf_counter_ns()
            server.rss_kib = rss_kib(server.pid)
            server.asked.set()
        server.done.wait(30)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/runtime/init/error"):
            self.server.init_error = body.decode(errors="replace")
            self.server.asked.set()
        self.send_response(202)
        self.end_headers()

    def log_message(self, *_):
        pass


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def start_once(name, command, task_root):
    """(cold start in ms, RSS in KiB) of one start of `command`."""
    server = RuntimeApi()
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    env = lambda_env(name, server.address, task_root)
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter_ns()
        proc = subprocess.Popen(command, env=env, cwd=task_root, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=stderr)
        server.pid = proc.pid
        finished = server.asked.wait(30)
        server.done.set()
        proc.kill()
        proc.wait()
        server.shutdown()
        server.server_close()
        if not finished or server.init_error is not None or server.asked_at is None:
            stderr.seek(0)
            sys.exit(f"bench-cold-start: {name} did not reach its first invocation: "
                     f"{server.init_error or stderr.read().decode(errors='replace')[-2000:]}")
    return (server.asked_at - started) / 1e6, server.rss_kib


def build(names):
    """`cargo lambda build --release --output-format zip` for this machine's architecture."""
    arch = {"x86_64": "--x86-64", "aarch64": "--arm64"}[os.uname().machine]
    bins = [a for n in names for a in ("--bin", n)]
    env = dict(os.environ)
    # cargo-lambda finds zig, its linker, through the venv's python (ziglang).
    env["PATH"] = os.path.join(ROOT, ".tools/venv/bin") + os.pathsep + env["PATH"]
    command = ["cargo", "lambda", "build", "--release", arch, "--output-format", "zip", *bins]
    print("+ " + " ".join(command), file=sys.stderr)
    started = time.monotonic()
    subprocess.run(command, cwd=ROOT, env=env, check=True, stdin=subprocess.DEVNULL)
    print(f"bench-cold-start: built in {time.monotonic() - started:.0f} s", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-build", action="store_true", help="use the zips already in target/lambda")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    rust = FUNCTIONS + [PROBE]
    if not args.no_build:
        build(rust)
    work = tempfile.mkdtemp(prefix="sortie-cold-start-")
    candidates = {}
    zips = {}
    for name in rust:
        path = os.path.join(ROOT, "target/lambda", name, "bootstrap.zip")
        zips[name] = os.path.getsize(path)
        root = os.path.join(work, name)
        with zipfile.ZipFile(path) as z:
            z.extractall(root)
        os.chmod(os.path.join(root, "bootstrap"), 0o755)
        candidates[name] = ([os.path.join(root, "bootstrap")], root)
    candidates[BOTO3] = ([sys.executable, os.path.join(ROOT, "bench/cold_start_boto3.py")], work)

    figures = {name: {"ms": [], "rss_kib": []} for name in candidates}
    try:
        # One start of each first, unmeasured: the page cache, as for every start after.
        for name, (command, root) in candidates.items():
            start_once(name, command, root)
        for _ in range(args.runs):
            order = list(candidates)
            random.shuffle(order)
            for name in order:
                ms, rss = start_once(name, *candidates[name])
                figures[name]["ms"].append(ms)
                figures[name]["rss_kib"].append(rss)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    probe = statistics.median(figures[PROBE]["ms"])
    rows = []
    for name in FUNCTIONS + [PROBE, BOTO3]:
        ms = figures[name]["ms"]
        rss = [r for r in figures[name]["rss_kib"] if r is not None]
        rows.append({
            "name": name,
            "median_ms": statistics.median(ms),
            "p90_ms": statistics.quantiles(ms, n=10, method="inclusive")[-1],
            "ratio_to_probe": statistics.median(ms) / probe,
            "rss_mib": statistics.median(rss) / 1024 if rss else None,
            "zip_mib": zips[name] / 1048576 if name in zips else None,
        })
    print(f"cold start: medians of {args.runs} starts each, taking turns; "
          f"{os.uname().machine}, {os.cpu_count()} cores")
    print("| | median (ms) | p90 (ms) | × probe | RSS at init (MiB) | zip (MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        rss = f"{r['rss_mib']:.1f}" if r["rss_mib"] is not None else "–"
        size = f"{r['zip_mib']:.2f}" if r["zip_mib"] is not None else "–"
        print(f"| {r['name']} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} | "
              f"{r['ratio_to_probe']:.2f} | {rss} | {size} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": args.runs, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
