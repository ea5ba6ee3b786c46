"""The log pipeline's figures (issue 27): requests per ten-minute job and their cost,
a 60-minute 50 MB log read back through the API, and follow latency.

    scripts/with-moto.sh .tools/venv/bin/python scripts/bench_logs.py [--non-log-usd X]

1. Requests per ten-minute job nobody follows, counted by the pilot's own pump on a fake
   clock (`cargo test -p sortie-pilot --lib a_ten_minute_job`), priced at us-east-1 list
   prices, before (a chunk and a presigning call every second), the first paced design
   (a chunk every 30 s, the follow marker read every 5 s) and now.
2. A followed ten-minute job (`run --wait`, `logs -f`): without a live bucket (a chunk a
   second, the follower asking the API twice every 500 ms) and with one (the live object
   rewritten every second on S3 Express One Zone, chunks every 60 s, the follower reading
   the live object directly and the API every 15 s), from the pilot's counts on a fake
   clock and the CLI's follow pace (crates/cli/src/follow/watch.rs).
3. The round trip and the follow latency on moto (a follower from the start, and
   followers who join mid-run, before and after) (`cargo test -p sortie-api --test it --
   logs::`), whose lines are printed as they are.

The total adds the rest of a job's control-plane cost: `--non-log-usd` (USD per 1,000
jobs, the soak's figure from scripts/soak.py when it has run), else the estimate below.
Prints a Markdown table; `--json FILE` also writes the figures.
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# us-east-1 list prices, USD (2026-11), the same as scripts/soak.py's.
API_GATEWAY = 1.00 / 1e6
LAMBDA_REQUEST = 0.20 / 1e6
LAMBDA_GB_S = 0.0000133334
LAMBDA_MEMORY_GB = 128 / 1024
LAMBDA_CALL_S = 0.030  # one presigning call: two presigns and one GetItem
DYNAMODB_READ = 0.125 / 1e6
DYNAMODB_WRITE = 0.625 / 1e6
SQS = 0.40 / 1e6
EVENTBRIDGE = 1.00 / 1e6
S3_PUT = 0.005 / 1000
S3_GET = 0.0004 / 1000
# S3 Express One Zone (a directory bucket), us-east-1 list prices since 2025-04-10: PUT (and
# COPY, POST, LIST) $0.00113 per 1,000, GET and all other requests (CreateSession too)
# $0.00003 per 1,000; a request's bytes past 512 KB cost extra, and the live object is at
# most 256 KiB (LIVE_MAX_BYTES).
EXPRESS_PUT = 0.00113 / 1000
EXPRESS_GET = 0.00003 / 1000
# Secrets Manager (issue 41): $0.40 per secret-month, prorated by the hour a secret is kept
# (a month taken as 730 hours; a secret of a ten-minute job is billed one hour), and $0.05
# per 10,000 API calls.
SECRET_MONTH = 0.40
HOURS_PER_MONTH = 730
SECRETS_API_CALL = 0.05 / 10_000

# One API call through API Gateway to the api Lambda, reading the job once.
API_CALL = API_GATEWAY + LAMBDA_REQUEST + LAMBDA_GB_S * LAMBDA_MEMORY_GB * LAMBDA_CALL_S + DYNAMODB_READ

# The rest of a job when the soak has not priced it: an estimate from its steps (submit,
# dispatch, launch record, spec, tool, summary, three artifact uploads, end, release).
NON_LOG_ESTIMATE = {
    "API calls (submit, spec, tool, summary, 3 artifact grants)": (7, API_CALL),
    "Lambda invocations off the API (dispatch, 2 task events, release)": (4, LAMBDA_REQUEST + LAMBDA_GB_S * LAMBDA_MEMORY_GB * 0.05),
    "DynamoDB write units (submit transaction, claim, record, end, release; 2 KB items)": (16, DYNAMODB_WRITE),
    "DynamoDB read units": (6, DYNAMODB_READ),
    "SQS requests (send, receive, delete)": (3, SQS),
    "EventBridge events (completion)": (1, EVENTBRIDGE),
    "S3 PUTs of artifacts (plan, summary, outputs)": (3, S3_PUT),
}


def secrets_usd(secrets, calls, hours=1):
    """Secrets Manager's cost per 1,000 jobs that keep `secrets` secrets each for `hours`
    (started hours) and make `calls` API calls each."""
    return (secrets * hours * SECRET_MONTH / HOURS_PER_MONTH + calls * SECRETS_API_CALL) * 1000


# A job with five sensitive variables: before issue 41 a secret each (5 CreateSecret, 5
# GetSecretValue, 5 DeleteSecret); now one secret (1 + 1 + 1 calls). A job without
# sensitive variables makes no secret and costs nothing here.
SECRETS_BEFORE = (5, 15)
SECRETS_AFTER = (1, 3)


def secrets_rows(total):
    """The cost model's Secrets Manager rows, for jobs with sensitive variables."""
    before, after = secrets_usd(*SECRETS_BEFORE), secrets_usd(*SECRETS_AFTER)
    print(f"  Secrets Manager, a job with 5 sensitive variables: before {SECRETS_BEFORE[0]} secrets × "
          f"1 h × ${SECRET_MONTH}/{HOURS_PER_MONTH} h + {SECRETS_BEFORE[1]} calls × $0.05/10,000, × 1,000 "
          f"= ${before:.3f}; after {SECRETS_AFTER[0]} secret, {SECRETS_AFTER[1]} calls = ${after:.3f}")
    return [
        ("Secrets Manager per 1,000 jobs with 5 sensitive variables, before (a secret each)", f"${before:.3f}", "", None),
        ("Secrets Manager per 1,000 jobs with sensitive variables, after (one secret per job)", f"${after:.3f}", "", None),
        ("control plane per 1,000 ten-minute jobs with sensitive variables", f"${total + after:.3f}", "", None),
    ]


# The CLI's follow pace (crates/cli/src/follow/watch.rs): a poll every 500 ms; without a
# live object each poll reads the job and its log (two API calls); with one, the API every
# FOLLOWER_API_EVERY (15 s: the log), the job every 30 s, and the log once more after each
# chunk shipment (the live object then starts past the follower).
JOB_SECONDS = 600
POLL_S = 0.5
FOLLOWER_API_EVERY_S = 15
JOB_EVERY_S = 30
# The API writes the follow marker at most every 5 s per process (FOLLOW_MARK_EVERY).
MARK_EVERY_S = 5


def followed_rows(args, unfollowed_gets):
    """A followed ten-minute job's log, without and with a live bucket; and an unfollowed
    one whose follow marker is in the live bucket."""
    plain = run(["cargo", "test", "-p", "sortie-pilot", "--lib", "a_ten_minute_followed_job", "--", "--nocapture"])
    live = run(["cargo", "test", "-p", "sortie-pilot", "--lib", "a_followed_job_with_a_live_bucket", "--", "--nocapture"])
    m = re.search(r"without a live bucket: (\d+) S3 PUTs, (\d+) presigning calls, (\d+) follow-marker GETs", plain)
    n = re.search(r"with a live bucket: (\d+) chunk PUTs, (\d+) presigning calls, (\d+) live PUTs, "
                  r"(\d+) follow-marker GETs", live)
    if not m or not n:
        sys.exit("bench_logs: the pilot's followed-job tests printed no request counts")
    p_puts, p_calls, p_gets = map(int, m.groups())
    l_puts, l_calls, l_live, l_gets = map(int, n.groups())
    polls = int(JOB_SECONDS / POLL_S)
    # Without a live bucket: two API calls a poll; the marker rewritten every 5 s.
    plain_follower_calls = 2 * polls
    plain_marks = JOB_SECONDS // MARK_EVERY_S
    plain_usd = (p_calls * API_CALL + p_puts * S3_PUT + p_gets * S3_GET
                 + plain_follower_calls * API_CALL + plain_marks * S3_PUT) * 1000
    # With one: the API every 15 s, the job every 30 s, once more per chunk shipment; the
    # live object read on every other poll; the marker (in the live bucket) written on each
    # log read, at most every 5 s; about one CreateSession a minute.
    log_reads = JOB_SECONDS // FOLLOWER_API_EVERY_S + l_puts
    follower_calls = log_reads + JOB_SECONDS // JOB_EVERY_S
    live_gets = polls - JOB_SECONDS // FOLLOWER_API_EVERY_S
    marks = min(log_reads, JOB_SECONDS // MARK_EVERY_S)
    sessions = JOB_SECONDS // 60
    parts = [
        ("the pilot's chunk PUTs (general purpose)", l_puts, S3_PUT),
        ("the pilot's presigning calls", l_calls, API_CALL),
        ("the pilot's live PUTs (S3 Express)", l_live, EXPRESS_PUT),
        ("the pilot's follow-marker GETs (S3 Express)", l_gets, EXPRESS_GET),
        ("the follower's API calls", follower_calls, API_CALL),
        ("the follower's live GETs (S3 Express)", live_gets, EXPRESS_GET),
        ("the API's follow-marker PUTs (S3 Express)", marks, EXPRESS_PUT),
        ("the API's CreateSession calls (S3 Express)", sessions, EXPRESS_GET),
    ]
    live_usd = sum(count * price for _, count, price in parts) * 1000
    print("\nA followed ten-minute job's log per 1,000 jobs (a line a second):")
    print(f"  without a live bucket: pilot {p_puts} PUTs + {p_calls} API calls + {p_gets} GETs; follower "
          f"{plain_follower_calls} API calls; {plain_marks} marker PUTs = ${plain_usd:.3f}")
    for what, count, price in parts:
        print(f"  with a live bucket: {what}: {count} × ${price * 1e6:.3f} per million = ${count * price * 1000:.4f}")
    print(f"  with a live bucket: total ${live_usd:.3f} (goal ≤ $1.00)")
    unfollowed_live = ((10 * API_CALL + 10 * S3_PUT + unfollowed_gets * EXPRESS_GET)) * 1000
    return [
        ("log cost per 1,000 followed ten-minute jobs, without a live bucket", f"${plain_usd:.3f}", "", None),
        ("log cost per 1,000 followed ten-minute jobs, with a live bucket (S3 Express One Zone)",
         f"${live_usd:.3f}", "≤ $1.00", live_usd <= 1.00),
        ("log cost per 1,000 unfollowed ten-minute jobs, with a live bucket (the marker there)",
         f"${unfollowed_live:.3f}", "", None),
    ]


def run(command):
    print("+ " + " ".join(command), file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=ROOT, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stderr.write(done.stdout)
    if done.returncode != 0:
        sys.exit(f"bench_logs: `{' '.join(command)}` failed with {done.returncode}")
    return done.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--non-log-usd", type=float, help="the rest of a job's cost, USD per 1,000 jobs")
    ap.add_argument("--skip-moto", action="store_true", help="only the cost (no moto needed)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    rows = []

    out = run(["cargo", "test", "-p", "sortie-pilot", "--lib", "a_ten_minute_job", "--", "--nocapture"])
    m = re.search(r"(\d+) S3 PUTs, (\d+) presigning calls, (\d+) follow-marker GETs", out)
    if not m:
        sys.exit("bench_logs: the pilot's test printed no request counts")
    puts, calls, gets = map(int, m.groups())
    before = 600 * (API_CALL + S3_PUT) * 1000
    # The first paced design (chunks every 30 s, the marker read every 5 s).
    paced = (20 * API_CALL + 20 * S3_PUT + 120 * S3_GET) * 1000
    after = (calls * API_CALL + puts * S3_PUT + gets * S3_GET) * 1000
    print("\nCost of the log per 1,000 ten-minute jobs (us-east-1 list prices):")
    print(f"  one API call = ${API_GATEWAY * 1e6:.2f} + ${LAMBDA_REQUEST * 1e6:.2f} + "
          f"${LAMBDA_GB_S * LAMBDA_MEMORY_GB * LAMBDA_CALL_S * 1e6:.3f} (Lambda GB-s) + "
          f"${DYNAMODB_READ * 1e6:.3f} (GetItem) = ${API_CALL * 1e6:.3f} per million")
    print(f"  before: 600 × (${API_CALL * 1e6:.3f} + ${S3_PUT * 1e6:.2f}) per million × 1,000 = ${before:.2f}")
    print(f"  first paced design: 20 × ${API_CALL * 1e6:.3f} + 20 × ${S3_PUT * 1e6:.2f} + 120 × "
          f"${S3_GET * 1e6:.2f}, per million × 1,000 = ${paced:.3f}")
    print(f"  after:  {calls} × ${API_CALL * 1e6:.3f} + {puts} × ${S3_PUT * 1e6:.2f} + {gets} × "
          f"${S3_GET * 1e6:.2f}, per million × 1,000 = ${after:.3f}")
    if args.non_log_usd is not None:
        non_log, source = args.non_log_usd, "given (--non-log-usd)"
    else:
        non_log = sum(n * p for n, p in NON_LOG_ESTIMATE.values()) * 1000
        source = "estimated"
        for what, (n, p) in NON_LOG_ESTIMATE.items():
            print(f"  rest of a job: {what}: {n} × ${p * 1e6:.3f} per million")
    total = after + non_log
    print(f"  rest of a job ({source}): ${non_log:.3f}; total ${total:.3f} per 1,000 jobs (goal ≤ $0.40)")
    rows += [
        ("log requests per 10-minute job (nobody follows)", f"{puts} PUT, {calls} API calls, {gets} GET", "", None),
        ("log cost per 1,000 ten-minute jobs, before", f"${before:.2f}", "", None),
        ("log cost per 1,000 ten-minute jobs, first paced design (marker every 5 s)", f"${paced:.3f}", "", None),
        ("log cost per 1,000 ten-minute jobs, after", f"${after:.3f}", "", None),
        (f"control plane per 1,000 ten-minute jobs ({source} rest)", f"${total:.3f}", "≤ $0.40", total <= 0.40),
    ]
    rows += secrets_rows(total)
    rows += followed_rows(args, gets)
    figures = {"puts": puts, "calls": calls, "gets": gets, "before_usd": before, "paced_usd": paced,
               "after_usd": after, "non_log_usd": non_log, "total_usd": total}

    if not args.skip_moto:
        if not os.environ.get("AWS_ENDPOINT_URL"):
            sys.exit("bench_logs: run it under scripts/with-moto.sh (or pass --skip-moto)")
        out = run(["cargo", "test", "-p", "sortie-api", "--test", "it", "--", "logs::",
                   "--nocapture", "--test-threads=1"])
        trip = re.search(r"read back from offset 0 in (\d+) pages in ([\d.]+) s; largest answer ([\d.]+) MB; "
                         r"slowest call ([\d.]+) s", out)
        follow = re.search(r"follow latency \(line written → seen by.*?p50 (\d+) ms, p99 (\d+) ms, max (\d+) ms", out)
        direct = re.search(r"live follow latency .*?p50 (\d+) ms, p99 (\d+) ms, max (\d+) ms; (\d+) API calls, "
                           r"(\d+) live GETs, (\d+) gaps in (\d+) s", out)
        joins = {tag: re.search(rf"mid-run follow latency, {tag} .*?(\d+) lines;.*?p50 (\d+) ms, p99 (\d+) ms, "
                                rf"max (\d+) ms", out) for tag in ("before", "after")}
        if trip:
            pages, secs, largest, slowest = trip.groups()
            rows.append(("60-minute 50 MB log read from offset 0", f"{secs} s in {pages} pages", "< 10 s",
                         float(secs) < 10))
            rows.append(("largest log answer / slowest call", f"{largest} MB / {slowest} s", "≤ 5 MB / < 10 s",
                         float(largest) <= 5 and float(slowest) < 10))
            figures.update(read_s=float(secs), pages=int(pages), largest_mb=float(largest))
        if follow:
            p50, p99, worst = map(int, follow.groups())
            rows.append(("follow latency, followed log", f"p50 {p50} ms, p99 {p99} ms", "p99 ≤ 2 s", p99 <= 2000))
            figures.update(follow_p50_ms=p50, follow_p99_ms=p99)
        if direct:
            p50, p99, worst, calls, gets, gaps, secs = map(int, direct.groups())
            rows.append(("follow latency, a follower reading the live object (S3 Express double)",
                         f"p50 {p50} ms, p99 {p99} ms ({calls} API calls, {gets} live GETs in {secs} s)",
                         "p99 ≤ 2 s", p99 <= 2000))
            figures.update(live_follow_p50_ms=p50, live_follow_p99_ms=p99)
        for tag, m in joins.items():
            if m:
                lines, p50, p99, worst = map(int, m.groups())
                rows.append((f"follow latency, follower joins mid-run, {tag} ({lines} lines)",
                             f"p50 {p50} ms, p99 {p99} ms, max {worst} ms", "p99 ≤ 2 s", p99 <= 2000))
                figures.update({f"join_{tag}_p50_ms": p50, f"join_{tag}_p99_ms": p99})

    print("\n| measure | figure | goal | met |\n|---|---|---|---|")
    for what, figure, goal, met in rows:
        print(f"| {what} | {figure} | {goal} | {'' if met is None else ('yes' if met else 'NO')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
