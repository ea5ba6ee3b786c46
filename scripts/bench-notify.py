"""An event's way to a notification receiver through `sortie dev` (issue 44's goal: p99 <= 2 s
after it is published).

    cargo build -p sortie-cli
    scripts/with-moto.sh .tools/venv/bin/python scripts/bench-notify.py [--events 200]

Starts `sortie dev` against the moto of scripts/with-moto.sh, a receiver on 127.0.0.1 and
one destination of group `acme` that hears `lock_changed`, then locks and unlocks
environment `acme/web/dev` `--events` times in all, one after another. Each event's time
is taken from the lock (or unlock) call's answer, when the change and its event are
published, to the receiver's read of the delivery's body: the in-process worker's fan-out
(the destinations of the group and its ancestors read on moto), the history's sequence
number and record (two DynamoDB writes on moto), the signing secret (Secrets Manager on
moto) and the signed POST. Prints p50, p99 and max.
"""

import argparse
import http.server
import importlib.util
import os
import shutil
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("e2e_common", os.path.join(ROOT, "scripts", "e2e_common.py"))
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=200)
    p.add_argument("--sortie", default=os.path.join(ROOT, "target", "debug", "sortie"))
    p.add_argument("--runner", default=os.path.join(ROOT, "target", "debug", "sortie-pilot"))
    args = p.parse_args()
    if not os.environ.get("AWS_ENDPOINT_URL"):
        sys.exit("bench-notify: run me through scripts/with-moto.sh (no AWS_ENDPOINT_URL)")

    arrived = {}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            at = time.monotonic()
            with lock:
                arrived[len(arrived)] = (at, body)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = os.path.join(ROOT, ".tools", "bench-notify")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    dev, api = _common.start_dev(args.sortie, work, str(int(time.time())), args.runner)
    try:
        api.call("POST", "/v1/groups/acme/-/runners/local", {
            "runner_configuration": {"type": "local"},
            "state_storage_configuration": {"type": "local", "directory": os.path.join(work, "state")}})
        api.call("POST", "/v1/groups/acme/-/rules", {"id": "default", "runner_id": "acme/local"})
        api.call("POST", "/v1/groups/acme/web/-/environments", {"name": "dev", "env_type": "development"})
        api.call("POST", "/v1/groups/acme/-/notifications/bench", {
            "type": "webhook", "url": f"http://127.0.0.1:{server.server_address[1]}/hook",
            "events": ["lock_changed"]})
        latencies = []
        for i in range(args.events):
            verb = "lock" if i % 2 == 0 else "unlock"
            body = {"reason": "bench"} if verb == "lock" else None
            api.call("POST", f"/v1/environments/acme%2Fweb%2Fdev/-/{verb}", body)
            published = time.monotonic()
            deadline = published + 10
            while len(arrived) <= i:
                if time.monotonic() > deadline:
                    sys.exit(f"bench-notify: event {i} never reached the receiver")
                time.sleep(0.001)
            latencies.append((arrived[i][0] - published) * 1000)
        latencies.sort()

        def pct(q):
            return latencies[min(len(latencies) - 1, int(len(latencies) * q / 100))]
        print(f"bench-notify: {len(latencies)} events, publish -> receiver: "
              f"p50 {pct(50):.1f} ms, p99 {pct(99):.1f} ms, max {latencies[-1]:.1f} ms (goal p99 <= 2000 ms)")
        if pct(99) > 2000:
            sys.exit("bench-notify: over the goal")
    finally:
        _common.stop_dev(dev)
        server.shutdown()


if __name__ == "__main__":
    main()
