"""The Sortie console in a real browser (issue 29), against `sortie dev` on moto with real
Terraform 1.11 (`terraform_data` resources, `local-exec` provisioners):

    scripts/with-moto.sh .tools/venv/bin/python scripts/console_test.py [--screenshots DIR]

`make test` runs it; `make console` runs it with `--screenshots docs/console`. It starts
`sortie dev --user alice --user bob --user carol`, makes through the public API a local runner, a rule and
an environment that requires approval with four eyes (hostile labels), then in headless
Chromium (scripts/console_browser.py):

1. alice signs in with her token, walks the tree to the environment and opens it; she
   submits an apply (API), opens the job, sees its log while the plan runs, reviews the plan
   (grouped by action, a resource expanded to its attributes) and is refused her own
   approval (`four-eyes` shown, approve absent or disabled);
2. bob signs in, opens the job, approves it with a comment using only the keyboard in the
   dialog (Escape closes it first), follows the apply's log (`tick <epoch ms>` lines printed
   slowly by local-exec) and sees it succeed with its outputs;
3. a second apply that replaces the resource shows the replacement marked; the tree's
   "awaiting my approval" view leads bob to it, and he discards it;
4. hostile data (`<script>`, `<img onerror>`, `javascript:` and ANSI escapes) in the labels,
   variables, log, plan values and an output shows as text and nothing runs;
5. the group page lists the runner and its check button works;
6. bob binds the environment to a repository in its "Pull requests" card, a bad repository
   shows the API's problem by its input, and he removes the binding; carol, a deployer, sees
   the binding but no form (scripts/console_vcs.py);
7. carol sees no runner check, a policy-denied apply's diff, the policy sets in force, the
   jobs' summaries and failure reasons, and what the approve dialog approves (console_review.py);
8. the group page's notifications: bob sees a destination given up on, redelivers its
   delivery once the receiver answers and sends a test; carol reads and sends nothing
   (console_notify.py);
9. alice (an owner) reads acme's audit trail from the group page, filters it by action and
   verifies its chain in the browser; carol has no link and is refused (console_audit.py);
10. no page logs a console error or a CSP violation.

Figures (printed; BENCHMARKS.md records them): the job page's first contentful paint on fresh
loads (p50/max), the delay between a log line's printing and its appearance (p50/p99/max),
and the gzipped size of the console's assets. Exit status 0 only when every check passed.
Environment: SORTIE_TEST_TERRAFORM_111 (Terraform 1.11.x; the test fails without it),
AWS_ENDPOINT_URL (moto; scripts/with-moto.sh sets both).
"""

import argparse
import gzip
import json
import os
import shutil
import signal
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from console_browser import Browser, css, wait_poll  # noqa: E402
from console_scenario import (  # noqa: E402
    HOSTILE_LABELS,
    HOSTILE_TEXTS,
    IDENTITY_ROLES,
    SECRET,
    apply_body,
    setup,
)
from console_review import ALLOWED as REVIEW_ALLOWED, review  # noqa: E402
from console_vcs import ALLOWED as VCS_ALLOWED, pull_requests  # noqa: E402
from console_notify import notifications  # noqa: E402
from console_audit import ALLOWED as AUDIT_ALLOWED, audit  # noqa: E402
from e2e_common import ROOT, Api, pct, start_dev  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

GROUP, ENV = "acme", "acme/web/review"
TERMINAL = {"succeeded", "failed", "canceled", "timed_out", "discarded"}
# Goals of issue 29. The asset size is asserted; first paint with twice the goal as slack
# (timed assertions are flaky on a shared machine); `--assert-figures` asserts them exactly.
FCP_GOAL_MS, ASSETS_GOAL_KB, LOG_GOAL_MS = 300, 150, 2000


def step(text):
    print(f"console test: {text}", flush=True)


class Checks:
    """Failures gathered, so one run reports every broken page at once."""

    def __init__(self):
        self.failed = []

    def check(self, ok, what):
        if not ok:
            self.failed.append(what)
            print(f"console test: FAIL: {what}", file=sys.stderr, flush=True)
        return ok


class Timeout(Exception):
    pass


def wait_job(api, job_id, states, timeout=120):
    def poll():
        job = api.call("GET", f"/v1/jobs/{job_id}", attempts=3)
        if job["state"] in states:
            return job
        if job["state"] in TERMINAL:
            raise AssertionError(f"job {job_id} ended {job['state']}, wanted {sorted(states)}: "
                                 f"{log_text(api, job_id)[-2000:]}")
        return None
    return wait_poll(poll, timeout, 0.3, f"job {job_id} to be {sorted(states)}")


def log_text(api, job_id):
    text, offset = "", 0
    for _ in range(200):
        page = api.call("GET", f"/v1/jobs/{job_id}/logs?offset={offset}")
        text += page.get("data", "")
        if not page.get("more"):
            break
        offset = page["next_offset"]
    return text


# The one failed request a page may log: the sign-in form's whoami with a wrong token.
WRONG_TOKEN_401 = r"/v1/whoami - Failed to load resource: the server responded with a status of 401"


def sign_in(b, token, subject, c=None):
    b.open("/signin")
    field = b.find(css("signin-token"))
    if c is not None:
        # A wrong token: the error is shown and the form stays.
        field.send_keys("not-a-token")
        b.find(css("signin-submit")).click()
        err = b.find(css("error"))
        c.check(err.text.strip() != "", "sign-in: a wrong token shows an error")
        c.check(b.has(css("signin-token")), "sign-in: the form stays after a wrong token")
        field = b.find(css("signin-token"))
    field.clear()
    field.send_keys(token)
    b.find(css("signin-submit")).click()
    b.until(f"whoami to say {subject}", lambda d: b.text(css("whoami")).strip() == subject)


def sign_out(b):
    b.find(css("signout")).click()
    b.find(css("signin-token"))
    stored = b.js("return sessionStorage.getItem('sortie.token')")
    assert stored is None, f"sign out left the token in sessionStorage: {stored!r}"


def safety(b, c, where):
    """Nothing from the hostile data ran or became markup."""
    c.check(b.pwned() is None, f"{where}: window.__pwned is {b.pwned()!r}: a script ran")
    c.check(not b.alert_open(), f"{where}: an alert is open")
    markup = b.data_markup()
    c.check(not markup, f"{where}: markup made from data: {markup}")
    stored = b.js("return [localStorage.length, document.cookie]")
    c.check(stored == [0, ""], f"{where}: localStorage/cookies used: {stored}")


def literal(b, c, selector, where, texts=HOSTILE_TEXTS):
    """Each of `texts` shows as literal text inside `selector`."""
    shown = b.find(selector).get_attribute("textContent")
    for t in texts:
        c.check(t in shown, f"{where}: {t!r} is not shown as text in {selector} "
                            f"(text: {shown[:300]!r})")
    return shown


def tree_and_env(b, c, shots):
    b.open("/")
    b.loaded("tree")
    # alice is granted a role on `acme` by subject, so whoami's `organisations` is ["acme"]
    # and the tree opens it at once: no organisation form to fill, no list of links.
    c.check(b.has(css("tree-group", path=GROUP)),
            "tree: alice's one organisation (whoami `organisations`) opened without asking")
    c.check(not b.has(css("org-list")) and not b.has(css("org-none")),
            "tree: one organisation shows neither the list of organisations nor the 'none' notice")
    # Once it is open, the organisation box is gone; with one organisation, no switch link.
    c.check(not b.has(css("org-input")) and not b.has(css("org-switch")),
            "tree: an open organisation hides the organisation box (one organisation: no switch link)")
    group = b.find(css("tree-group", path=GROUP))
    c.check(group is not None, "tree: group acme listed")
    row = b.find(css("tree-env", path=ENV))
    for part in ("env-runner", "env-last-job", "env-drift"):
        c.check(bool(row.find_elements("css selector", css(part))), f"tree: {ENV} has [data-test={part}]")
    # The search box narrows the tree.
    search = b.find(css("search"))
    search.send_keys("review")
    b.until("search to keep the environment", lambda d: b.has(css("tree-env", path=ENV)))
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys(Keys.BACKSPACE)
    b.until("clearing the search to show acme/web/dev again", lambda d: b.has(css("tree-env", path="acme/web/dev")))
    safety(b, c, "tree")
    b.find(css("tree-env", path=ENV) + " " + css("env-link")).click()
    b.loaded("env", path=ENV)
    # No job has run here yet: instead of a Run plan button that could only fail, the page
    # says how the first plan is made.
    b.until("the run-plan area to settle", lambda d: b.has(css("run-plan-first"))
            or b.has(css("run-plan") + ":not([disabled])"))
    c.check(b.has(css("run-plan-first")) and not b.has(css("run-plan")),
            "env page: with no job yet, no Run plan button but how to submit the first plan")
    settings = b.find(css("env-settings")).get_attribute("textContent")
    c.check("required" in settings.lower(), f"env page: approval `required` shown in settings: {settings[:200]!r}")
    literal(b, c, css("env-page"), "env page labels",
            [v for v in HOSTILE_LABELS.values()])
    why = b.find(css("env-why")).get_attribute("textContent")
    c.check("default" in why, f"env page: the rule `default` explains the runner: {why[:200]!r}")
    b.find(css("explain-full")).click()
    b.until("the full explanation", lambda d: b.find(css("env-why")).get_attribute("textContent") != why)
    safety(b, c, "env page")


def alice_reviews(b, c, alice, shots):
    job = alice.call("POST", f"/v1/environments/{ENV}/-/jobs", apply_body(1, ticks=10))
    jid = job["id"]
    step(f"alice submitted apply {jid}; opening its page while it runs")
    b.open(f"/jobs/{jid}")
    b.loaded("job", job=jid)
    state = b.state()
    c.check(state in {"queued", "dispatching", "running", "awaiting_approval"},
            f"job page: state word {state!r}")
    seen_running = state not in {"awaiting_approval"}
    lines_while_running = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = b.state()
        if state == "awaiting_approval":
            break
        if state in TERMINAL:
            raise AssertionError(f"job {jid} ended {state} before approval: {log_text(alice, jid)[-2000:]}")
        if b.has(css("log-following")):
            lines_while_running = max(lines_while_running, len(b.all(css("log-line"))))
        time.sleep(0.1)
    c.check(b.state() == "awaiting_approval", f"job page: reached awaiting_approval (is {state})")
    # Nothing runs while the job awaits a person: no "following", and once the plan's log
    # is complete it is not read again until the state changes (components/follow.js).
    b.until("following to stop while awaiting approval", lambda d: not b.has(css("log-following")), 5)
    c.check(not b.has(css("log-following")), "job page: no [data-test=log-following] while awaiting approval")
    time.sleep(1.0)  # the last page of the plan's log
    b.js("performance.clearResourceTimings()")
    time.sleep(6.0)
    log_reads = b.js("return performance.getEntriesByType('resource')"
                     ".filter(e => e.name.includes('/logs?')).length")
    c.check(log_reads <= 1, f"job page: the log is not read while awaiting approval ({log_reads} reads in 6 s)")
    step(f"awaiting approval: {log_reads} log reads in 6 s, no following marker")
    # The plan phase takes about a second: whether the page caught it running is luck, so
    # this is only told; bob's apply (slow `tick` lines) asserts the following.
    if seen_running:
        step(f"while the plan ran the page showed {lines_while_running} log lines as followed")
    # The plan, grouped by action, a resource expanded to its attributes.
    b.find(css("plan"))
    b.find(css("plan-group", action="create"))
    res = b.find(css("plan-resource", address="terraform_data.note"))
    if not res.get_attribute("open"):
        res.find_element("css selector", "summary").click()
    attr = b.find(css("plan-resource", address="terraform_data.note") + " " + css("plan-attr", name="input"))
    c.check(HOSTILE_TEXTS[0] in attr.get_attribute("textContent"),
            f"plan: input attribute shows the note as text: {attr.get_attribute('textContent')[:200]!r}")
    c.check(b.has(css("plan-resource", address="terraform_data.ticker")), "plan: terraform_data.ticker listed")
    # Four eyes: alice may not approve her own job.
    b.find(css("four-eyes"))
    approve = b.all(css("approve"))
    c.check(not approve or not approve[0].is_enabled(), "job page: approve absent or disabled for the requester")
    c.check(b.has(css("cancel-job")), "job page: cancel offered while the job is not terminal")
    lines = b.all(css("log-line"))
    c.check(len(lines) > 0, "job page: the plan's log is shown")
    literal(b, c, css("job-page"), "job page (variables, plan, log)")
    b.screenshot(shots, "job")
    safety(b, c, "job page (alice)")
    return jid


def install_tick_observer(b):
    """A MutationObserver on the log recording when each `tick <ms>` line first appears."""
    b.js("""
        window.__ticks = {};
        const scan = () => {
          const now = Date.now();
          for (const el of document.querySelectorAll('[data-test="log-line"]')) {
            const m = /tick (\\d{13})/.exec(el.textContent);
            if (m && !(m[1] in window.__ticks)) window.__ticks[m[1]] = now;
          }
        };
        scan();
        window.__tickObserver = new MutationObserver(scan);
        window.__tickObserver.observe(document.body, {childList: true, subtree: true, characterData: true});
    """)


def keyboard_approve(b, c, shots):
    approve = b.find(css("approve") + ":not([disabled])")
    approve.send_keys(Keys.ENTER)  # focus it and press Enter: the dialog opens
    dialog = css("decide-dialog")
    b.until("the decide dialog to open", lambda d: b.js(f"return !!document.querySelector('{dialog}')?.open"))
    inside = f"return !!document.querySelector('{dialog}').contains(document.activeElement)"
    c.check(b.js(inside), "dialog: focus moved into it")
    ActionChains(b.driver).send_keys(Keys.ESCAPE).perform()
    b.until("Escape to close the dialog", lambda d: not b.js(f"return !!document.querySelector('{dialog}')?.open"), 5)
    # Again, keyboard only: Enter on the focused approve button.
    b.find(css("approve")).send_keys(Keys.ENTER)
    b.until("the decide dialog to open again", lambda d: b.js(f"return !!document.querySelector('{dialog}')?.open"))
    b.screenshot(shots, "approve-dialog", whole=False)
    focus = lambda: b.js("return document.activeElement && document.activeElement.dataset.test")  # noqa: E731
    for _ in range(8):
        if focus() == "decide-comment":
            break
        ActionChains(b.driver).send_keys(Keys.TAB).perform()
        c.check(b.js(inside), "dialog: Tab keeps focus inside")
    c.check(focus() == "decide-comment", f"dialog: Tab reaches the comment (focus on {focus()!r})")
    ActionChains(b.driver).send_keys("looks right, approved from the keyboard").perform()
    for _ in range(8):
        if focus() == "decide-confirm":
            break
        ActionChains(b.driver).send_keys(Keys.TAB).perform()
    c.check(focus() == "decide-confirm", f"dialog: Tab reaches confirm (focus on {focus()!r})")
    ActionChains(b.driver).send_keys(Keys.ENTER).perform()
    b.until("the dialog to close after confirm", lambda d: not b.js(f"return !!document.querySelector('{dialog}')?.open"))


def bob_approves(b, c, bob, jid, shots):
    b.open(f"/jobs/{jid}")
    b.loaded("job", job=jid)
    c.check(not b.has(css("four-eyes")) or b.has(css("approve") + ":not([disabled])"),
            "job page (bob): approve offered to another deployer")
    install_tick_observer(b)
    keyboard_approve(b, c, shots)
    seen_following, counts = False, []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = b.state()
        if state in TERMINAL:
            break
        if b.has(css("log-following")):
            seen_following = True
        counts.append(len(b.all(css("log-line"))))
        time.sleep(0.1)
    c.check(b.state() == "succeeded", f"job page: apply succeeded (is {b.state()})")
    c.check(seen_following, "job page: [data-test=log-following] shown while the apply ran")
    c.check(len(set(counts)) >= 2, f"job page: the log grew while running ({sorted(set(counts))[:10]})")
    decided = b.find(css("decided-by")).text
    c.check("bob" in decided, f"job page: decided-by names bob: {decided!r}")
    c.check("alice" in b.text(css("requested-by")), "job page: requested-by names alice")
    outputs = b.find(css("job-outputs") + " " + css("output", name="greeting"))
    c.check("hello from the console test" in outputs.get_attribute("textContent"), "job page: output greeting shown")
    literal(b, c, css("job-outputs") + " " + css("output", name="note"), "job outputs (note)")
    c.check(SECRET not in b.find(css("job-page")).get_attribute("textContent"),
            "job page: the sensitive output's value is never shown")
    literal(b, c, css("log"), "job log")
    log_txt = b.find(css("log")).get_attribute("textContent")
    c.check("\x1b" not in log_txt, "job log: no raw ESC byte shown")
    # The note as local-exec printed it (Terraform's own plan lines quote it escaped).
    echoed = [e for e in b.all(css("log-line"))
              if "(local-exec): <script>" in e.get_attribute("textContent")]
    if c.check(len(echoed) == 1, f"job log: one local-exec line with the note ({len(echoed)})"):
        line = echoed[0].get_attribute("textContent")
        c.check("RED" in line and "[31m" not in line and "]8;;" not in line and "[2K" not in line
                and "moved" in line, f"job log: ANSI rendered or dropped, never shown raw: {line!r}")
        red = echoed[0].find_elements("css selector", "[class*=ansi-fg-1]")
        c.check(any("RED" in r.text for r in red), "job log: RED carries an ansi-fg-1 class")
        c.check(not echoed[0].find_elements("css selector", "a"), "job log: the OSC 8 hyperlink is no link")
    if c.check(b.has(css("log-jump-end")), "job log: jump-to-end button"):
        b.js(f"const l = document.querySelector('{css('log')}'); if (l.scrollHeight > l.clientHeight) l.scrollTop = 0;")
        b.find(css("log-jump-end")).click()
        at_end = ("const l = document.querySelector('" + css("log") + "'); "
                  "return l.scrollHeight - l.scrollTop - l.clientHeight < 8")
        b.until("jump to end to show the last log line", lambda d: b.js(at_end), 5)
    ticks = b.js("if (window.__tickObserver) window.__tickObserver.disconnect(); return window.__ticks || {}")
    safety(b, c, "job page (bob)")
    b.screenshot(shots, "job-applied")
    return [appear - int(printed) for printed, appear in ticks.items()]


def replacement(b, c, alice, bob, shots):
    job = alice.call("POST", f"/v1/environments/{ENV}/-/jobs", apply_body(2, ticks=1))
    wait_job(alice, job["id"], {"awaiting_approval"})
    b.open(f"/jobs/{job['id']}")
    b.loaded("job", job=job["id"])
    group = b.find(css("plan-group", action="replace"))
    c.check(bool(group.find_elements("css selector", css("plan-resource", address="terraform_data.ticker"))),
            "plan: terraform_data.ticker under replace")
    c.check(b.has(css("plan-replace")), "plan: the replacement is marked ([data-test=plan-replace])")
    b.screenshot(shots, "job-replace")
    safety(b, c, "job page (replacement)")
    # bob may decide it: the tree's "awaiting my approval" view lists the environment.
    b.open(f"/?org={GROUP}&awaiting=1")
    b.loaded("tree")
    row = b.find(css("tree-env", path=ENV))
    c.check(bool(row.find_elements("css selector", css("env-awaiting"))), "tree: awaiting approval marked")
    c.check(not b.has(css("tree-env", path="acme/web/dev")), "tree: the awaiting filter hides acme/web/dev")
    c.check(b.find(css("filter-awaiting")).is_selected(), "tree: the awaiting checkbox is ticked")
    b.open(f"/?org={GROUP}")
    b.loaded("tree")
    b.find(css("tree-env", path="acme/web/dev"))
    b.find(css("tree-env", path=ENV) + " " + css("env-awaiting"))
    b.screenshot(shots, "tree")
    # The badge leads to the job; bob discards it there, with the mouse this time.
    b.find(css("tree-env", path=ENV) + " " + css("env-awaiting")).click()
    b.loaded("job", job=job["id"])
    b.find(css("discard")).click()
    b.until("the discard dialog", lambda d: b.js(f"return !!document.querySelector('{css('decide-dialog')}')?.open"))
    b.find(css("decide-comment")).send_keys("not now")
    b.find(css("decide-confirm")).click()
    b.until("the job to be discarded", lambda d: b.state() == "discarded", 30)
    job = bob.call("GET", f"/v1/jobs/{job['id']}")
    c.check(job["state"] == "discarded", f"the API says the discarded job is {job['state']}")
    return job["id"]


def group_page(b, c, shots):
    b.open(f"/groups/{GROUP}")
    b.loaded("group", group=GROUP)
    identity = b.text(css("runner", name="cloud") + " " + css("runner-identity"))
    c.check(all(role in identity for role in IDENTITY_ROLES),
            f"group page: the cloud runner shows its job identity's roles: {identity!r}")
    runner = b.find(css("runners") + " " + css("runner", name="local"))
    runner.find_element("css selector", css("runner-check")).click()
    result = b.find(css("runner-check-result"), 60)
    c.check(result.text.strip() != "", "group page: runner check shows a result")
    for part in ("rules", "policy-sets", "agent-pools"):
        c.check(b.has(css(part)), f"group page: [data-test={part}]")
    b.screenshot(shots, "group")
    safety(b, c, "group page")


def first_paints(b, jid, loads):
    """First contentful paint (ms) of `loads` fresh loads of the job page."""
    out = []
    for _ in range(loads):
        b.open(f"/jobs/{jid}", fresh=True)
        b.loaded("job", job=jid)
        fcp = b.js("const e = performance.getEntriesByName('first-contentful-paint')[0];"
                   "return e ? e.startTime : null")
        if fcp is not None:
            out.append(fcp)
    return out


def asset_sizes(b, base):
    """Gzipped bytes of the console's own files the page loaded (index.html and /assets/)."""
    with urllib.request.urlopen(base, timeout=10) as r:
        policy = r.headers.get("Content-Security-Policy", "")
    for part in ("script-src 'self'", "frame-ancestors 'none'"):
        assert part in policy, f"the console's CSP lacks {part!r}: {policy!r}"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy, f"CSP allows inline/eval: {policy!r}"
    names = b.js("return performance.getEntriesByType('resource').map(e => e.name)")
    urls = sorted({n.split('#')[0] for n in names if "/assets/" in n} | {base})
    total, files = 0, {}
    for u in urls:
        with urllib.request.urlopen(u, timeout=10) as r:
            body = r.read()
        size = len(gzip.compress(body, compresslevel=9))
        files[u.rsplit("/assets/", 1)[-1]] = (len(body), size)
        total += size
    return total, files


def run(args, c):
    tf = os.environ.get("SORTIE_TEST_TERRAFORM_111", "")
    if not tf or not os.access(tf, os.X_OK):
        raise SystemExit("console test: FAILED: SORTIE_TEST_TERRAFORM_111 must name Terraform 1.11 "
                         f"(got {tf!r}); run through scripts/with-moto.sh on a machine with terraform on PATH")
    for binary in (args.sortie, args.runner):
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"console test: FAILED: {binary} is missing: build it first "
                             "(cargo build -p sortie-cli -p sortie-pilot --bins)")
    if not os.environ.get("AWS_ENDPOINT_URL"):
        raise SystemExit("console test: run me through scripts/with-moto.sh (no AWS_ENDPOINT_URL)")
    cli_config = os.environ.get("TF_CLI_CONFIG_FILE")
    if cli_config and not os.path.exists(cli_config):
        # A CLI configuration that is not there makes Terraform warn in every job's log.
        del os.environ["TF_CLI_CONFIG_FILE"]
    work = os.path.join(ROOT, ".tools", "console-test")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    stamp = str(int(time.time()))
    step(f"starting sortie dev --user alice --user bob --user carol (Terraform {tf}; work {work})")
    dev, admin = start_dev(args.sortie, work, stamp, args.runner, log_name="sortie-dev.log",
                           env={"SORTIE_TERRAFORM": tf}, timeout=90,
                           extra=("--user", "alice", "--user", "bob", "--user", "carol", "--sweep-every", "2",
                                  "--audit-settle", "1"))
    state = {"dev": dev, "browser": None}
    try:
        ready = json.load(open(os.path.join(work, "ready.json")))
        users = ready["users"]
        alice, bob = Api(admin.url, users["alice"]), Api(admin.url, users["bob"])
        base = ready.get("console") or admin.url.rstrip("/") + "/"
        setup(admin, work)
        step("runner, rule, memberships and the environment made through the API")
        b = state["browser"] = Browser(base)
        shots = args.screenshots
        sign_in(b, users["alice"], "alice", c)
        step("alice signed in; tree and environment")
        tree_and_env(b, c, shots)
        b.screenshot(shots, "env-explain")
        jid = alice_reviews(b, c, alice, shots)
        step(f"alice reviewed {jid} and was refused her own approval; bob approves")
        sign_out(b)
        sign_in(b, users["bob"], "bob")
        latencies = bob_approves(b, c, bob, jid, shots)
        step("bob approved from the keyboard; the apply succeeded with its outputs")
        b.open(f"/env/{ENV}")
        b.loaded("env", path=ENV)
        literal(b, c, css("env-outputs") + " " + css("output", name="note"), "env outputs (note)")
        rows = b.all(css("env-jobs") + " " + css("job-row"))
        c.check(bool(rows) and rows[0].get_attribute("data-job") == jid
                and bool(rows[0].find_elements("css selector", css("job-link"))),
                "env page: the applied job is the newest row of its jobs, with a link")
        secret = b.find(css("env-outputs") + " " + css("output", name="secret"))
        c.check(bool(secret.find_elements("css selector", css("output-sensitive"))),
                "env outputs: `secret` is marked sensitive")
        c.check(SECRET not in b.find(css("env-page")).get_attribute("textContent"),
                "env page: the sensitive output's value is never shown")
        b.screenshot(shots, "env")
        safety(b, c, "env page (after apply)")
        replacement(b, c, alice, bob, shots)
        step("the replacement is marked, and bob discarded it; group page")
        group_page(b, c, shots)
        pull_requests(b, c, admin, users, shots, safety, sign_in, sign_out)
        step("bob bound, refused, rebound and unbound the pull-request binding; carol sees no form")
        review(b, c, admin, alice, wait_job, shots, safety)
        step("carol: no runner check, a denied apply's diff, policies in force, jobs' summaries, the approve dialog's facts")
        notifications(b, c, admin, users, shots, safety, sign_in, sign_out)
        step("bob redelivered a given-up delivery and sent a test; carol reads and sends nothing")
        audit(b, c, admin, users, shots, safety, sign_in, sign_out)
        step("alice read, filtered and verified acme's audit trail; carol has no link and is refused")
        fcps = first_paints(b, jid, args.loads)
        total, files = asset_sizes(b, base)
        problems = b.problems(allowed=[WRONG_TOKEN_401, *VCS_ALLOWED, *REVIEW_ALLOWED, *AUDIT_ALLOWED])
        c.check(not problems, "browser log has errors or CSP violations:\n  " + "\n  ".join(problems))
        figures(args, c, fcps, latencies, total, files)
    except (AssertionError, Timeout):
        if state["browser"]:  # what the page looked like, for the report
            b = state["browser"]
            b.screenshot(work, "failure")
            with open(os.path.join(work, "failure.html"), "w") as f:
                f.write(b.driver.page_source)
            print(f"console test: the failing page: {work}/failure.png, failure.html", file=sys.stderr)
            for line in b.problems():
                print(f"console test: browser log: {line}", file=sys.stderr)
        raise
    finally:
        if state["browser"]:
            state["browser"].quit()
        dev.terminate()
        try:
            dev.wait(timeout=20)
        except Exception:  # noqa: BLE001
            dev.kill()
            dev.wait()
        log = open(os.path.join(work, "sortie-dev.log"), errors="replace").read()
        c.check("panicked" not in log, f"sortie dev panicked (see {work}/sortie-dev.log)")


def figures(args, c, fcps, latencies, total, files):
    print("console test: figures", flush=True)
    if fcps:
        print(f"  job page first contentful paint: p50 {pct(fcps, 50):.0f} ms, max {max(fcps):.0f} ms "
              f"over {len(fcps)} fresh loads (goal <= {FCP_GOAL_MS} ms)")
    else:
        c.check(False, "no first-contentful-paint entry on the job page")
    if latencies:
        print(f"  new log line latency: p50 {pct(latencies, 50):.0f} ms, p99 {pct(latencies, 99):.0f} ms, "
              f"max {max(latencies):.0f} ms over {len(latencies)} lines (goal p99 <= {LOG_GOAL_MS} ms)")
    else:
        c.check(False, "no `tick` log line was seen appearing in the page")
    raw = sum(r for r, _ in files.values())
    print(f"  console assets gzipped: {total / 1024:.1f} KB ({raw / 1024:.1f} KB raw) over {len(files)} files "
          f"(goal <= {ASSETS_GOAL_KB} KB)")
    for name, (raw, gz) in sorted(files.items(), key=lambda kv: -kv[1][1]):
        print(f"    {gz / 1024:7.1f} KB gz {raw / 1024:7.1f} KB  {name}")
    c.check(total <= ASSETS_GOAL_KB * 1024, f"assets are {total / 1024:.1f} KB gzipped, goal {ASSETS_GOAL_KB}")
    # First paint's median was 72 to 208 ms in every run, under load: it is asserted with
    # twice the goal as slack (a page that waits for its data before painting fails it);
    # `--assert-figures` asserts the goals themselves, and the log latency's.
    slack = 1 if args.assert_figures else 2
    if fcps:
        c.check(pct(fcps, 50) <= FCP_GOAL_MS * slack,
                f"first contentful paint p50 {pct(fcps, 50):.0f} ms, over {FCP_GOAL_MS * slack} ms")
    if args.assert_figures and latencies:
        c.check(pct(latencies, 99) <= LOG_GOAL_MS, f"log line latency p99 {pct(latencies, 99):.0f} ms")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--screenshots", default=os.path.join(ROOT, "target", "console-screenshots"))
    p.add_argument("--sortie", default=os.path.join(ROOT, "target", "debug", "sortie"))
    p.add_argument("--runner", default=os.path.join(ROOT, "target", "debug", "sortie-pilot"))
    p.add_argument("--timeout", type=int, default=300, help="seconds for the whole test")
    p.add_argument("--loads", type=int, default=7, help="fresh loads of the job page for the FCP")
    p.add_argument("--assert-figures", action="store_true",
                   help="assert the first paint and log latency goals without slack")
    args = p.parse_args()

    def on_alarm(*_):
        raise Timeout(f"the console test took more than {args.timeout}s")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.timeout)
    c = Checks()
    started = time.monotonic()
    try:
        run(args, c)
    except (AssertionError, Timeout) as e:
        c.failed.append(str(e))
        print(f"console test: FAILED: {e}", file=sys.stderr)
    finally:
        signal.alarm(0)
    if c.failed:
        print(f"console test: {len(c.failed)} check(s) failed in {time.monotonic() - started:.0f}s",
              file=sys.stderr)
        sys.exit(1)
    step(f"passed in {time.monotonic() - started:.0f}s (screenshots in {args.screenshots})")


if __name__ == "__main__":
    main()
