"""The console test's notifications step (scripts/console_test.py): the group page's
"Notifications" card (crates/console/assets/pages/group_notify.js), against the same
`sortie dev` and a receiver on 127.0.0.1 (plain http to loopback is allowed in `sortie dev`).

Two destinations hear `acme`'s lock changes: `hooks` (answers 200) and `down` (answers 404,
so its delivery is given up on and it turns unhealthy). bob (a maintainer) sees both, `down`
marked unhealthy with the receiver's 404 in words; opens `down`'s deliveries, makes the
receiver answer again and redelivers: the row says delivered and `down` is healthy again;
sends `hooks` a test from the keyboard and reads the receiver's answer. carol (a deployer)
sees the destinations and their deliveries, and no Send test or Redeliver button. The
destinations' hostile descriptions are text.
"""

import http.server
import threading

from console_browser import css, wait_poll
from console_scenario import IMG, SCRIPT
from selenium.webdriver.common.keys import Keys

GROUP = "acme"
ENV = "acme/web/dev"


class Receiver:
    """An HTTP receiver on 127.0.0.1: each path answers its status (200 unless set)."""

    def __init__(self):
        self.statuses, self.seen = {}, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(length)
                outer.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status = outer.statuses.get(self.path, 200)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(f"answer {status}".encode())

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self.server.shutdown()


def card_text(b):
    return b.find(css("notifications")).get_attribute("textContent")


def destination(b, name):
    return css("notifications") + " " + css("destination", name=name)


def health(b, name):
    return b.find(destination(b, name) + " " + css("destination-health")).get_attribute("data-healthy")


def notifications(b, c, admin, users, shots, safety, sign_in, sign_out):
    receiver = Receiver()
    try:
        receiver.statuses["/down"] = 404
        for name, path in (("hooks", "/hooks"), ("down", "/down")):
            admin.call("POST", f"/v1/groups/{GROUP}/-/notifications/{name}", {
                "type": "webhook", "url": receiver.url(path), "events": ["lock_changed"],
                "description": f"{SCRIPT} {IMG}"})
        admin.call("POST", f"/v1/environments/{ENV}/-/lock", {"reason": "console test"})
        admin.call("POST", f"/v1/environments/{ENV}/-/unlock")
        wait_poll(lambda: len(receiver.seen) >= 4, 30,
                  what="the deliveries of the lock and the unlock to both")
        wait_poll(lambda: admin.call("GET", f"/v1/groups/{GROUP}/-/notifications/down")
                  ["health"]["healthy"] is False, 30, what="down given up on")
        # bob manages the group: he may send.
        sign_out(b)
        sign_in(b, users["bob"], "bob")

        b.open(f"/groups/{GROUP}")
        b.loaded("group", group=GROUP)
        b.find(destination(b, "down"))
        c.check(health(b, "hooks") == "true" and health(b, "down") == "false",
                "notifications: hooks healthy, down unhealthy")
        failure = b.text(destination(b, "down") + " " + css("destination-failure"))
        c.check("404" in failure, f"notifications: down's failure says the receiver's 404: {failure!r}")
        text = card_text(b)
        c.check(SCRIPT in text and IMG in text, "notifications: hostile descriptions shown as text")
        c.check(receiver.url("/hooks") in text, "notifications: a webhook's URL is shown")

        # Redeliver down's first delivery once its receiver answers again.
        b.find(destination(b, "down") + " " + css("deliveries-toggle")).click()
        rows = css("deliveries") + "[data-loaded=true] " + css("delivery")
        b.until("down's deliveries", lambda d: len(b.all(destination(b, "down") + " " + rows)) >= 2)
        states = [r.get_attribute("data-state") for r in b.all(destination(b, "down") + " " + rows)]
        c.check(states and all(s == "gave_up" for s in states), f"deliveries: down gave up on each: {states}")
        receiver.statuses["/down"] = 200
        before = len(receiver.seen)
        b.find(destination(b, "down") + " " + css("redeliver")).click()
        said = b.find(destination(b, "down") + " " + css("redelivered"))
        c.check("delivered" in said.text, f"redeliver: says it was delivered: {said.text!r}")
        c.check(len(receiver.seen) == before + 1, "redeliver: the receiver got it once")
        b.until("down healthy again", lambda d: health(b, "down") == "true")
        b.screenshot(shots, "group-notifications")

        # A test, from the keyboard.
        b.find(destination(b, "hooks") + " " + css("notify-test")).send_keys(Keys.ENTER)
        result = b.find(destination(b, "hooks") + " " + css("notify-result"))
        c.check(result.get_attribute("data-state") == "delivered" and "200" in result.text,
                f"send test: the receiver's answer in words: {result.text!r}")
        c.check(receiver.seen[-1][0] == "/hooks"
                and receiver.seen[-1][1].get("x-sortie-event") == "sortie.notification.test",
                "send test: the receiver got a sortie.notification.test")
        safety(b, c, "group page (notifications, bob)")

        # carol deploys but does not manage: she reads, and sends nothing.
        sign_out(b)
        sign_in(b, users["carol"], "carol")
        b.open(f"/groups/{GROUP}")
        b.loaded("group", group=GROUP)
        b.find(destination(b, "down"))
        b.find(destination(b, "down") + " " + css("deliveries-toggle")).click()
        b.until("carol sees down's deliveries",
                lambda d: len(b.all(destination(b, "down") + " " + rows)) >= 1)
        for part in ("notify-test", "redeliver"):
            c.check(not b.has(css("notifications") + " " + css(part)),
                    f"notifications (carol, a deployer): no [data-test={part}]")
        c.check(b.has(css("notify-denied")), "notifications (carol): says which role sends")
        safety(b, c, "group page (notifications, carol)")
    finally:
        receiver.close()
