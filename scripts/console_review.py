"""The console test's reviewer step (scripts/console_test.py; issue 47, items 3, 8, 9 and 10),
against the same `sortie dev`, after the pull-request step (carol signed in):

- carol (a deployer) sees no enabled runner check on the group page, but what role it needs;
  an API error (a job that does not exist) shows its backticked names as code, no backtick;
- a mandatory policy set at `acme` denies every create on environments labelled
  `policy: deny` (its message carries hostile markup), an advisory one warns on those
  labelled `policy: warn`; an apply on `acme/web/gated` (approval `auto`) is denied: its
  job page shows the diff it was denied for, the state in words; the environment page lists
  the set in force, and its jobs table the change summary and the failure reason (as text,
  the whole reason as the cell's title);
- an apply by alice on `acme/web/reviewed` (approval `required`) awaits approval; carol's
  approve dialog names the environment, the requester, the counts and the policy result.
"""

import re

from console_browser import css
from console_scenario import IMG, apply_body, call

GATED, REVIEWED = "acme/web/gated", "acme/web/reviewed"
MISSING_JOB = "01m8h1gamjemvvhevamz61rdtf"
DENY_REGO = ("package nocreate\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n"
             "  \"create\" in rc.change.actions\n"
             f"  msg := sprintf(\"%s would be created {IMG}\", [rc.address])\n}}\n")
WARN_REGO = ("package advise\n\nwarn contains msg if {\n  some rc in input.plan.resource_changes\n"
             "  \"create\" in rc.change.actions\n  msg := sprintf(\"%s is new\", [rc.address])\n}\n")
# What the browser logs on purpose here and in the pages before: a plan asked for while a
# job has none yet (404), and the job that does not exist.
ALLOWED = [r"/v1/jobs/[0-9a-z]+/plan - Failed to load resource: the server responded with a status of 404",
           rf"/v1/jobs/{MISSING_JOB} - Failed to load resource: the server responded with a status of 404"]
COUNTS = re.compile(r"^\+\d+ ~\d+ -\d+$")


def world(admin):
    """The two policy sets and the two environments."""
    for name, enforcement, label, rego in (("no-create", "mandatory", "deny", DENY_REGO),
                                           ("advise", "advisory", "warn", WARN_REGO)):
        call(admin, "POST", f"/v1/groups/acme/-/policy-sets/{name}", {
            "enforcement": enforcement, "criteria": {"labels": {"policy": label}},
            "modules": [{"name": "main", "rego": rego}]})
    call(admin, "POST", "/v1/groups/acme/web/-/environments",
         {"name": "gated", "env_type": "staging", "labels": {"policy": "deny"}})
    call(admin, "POST", "/v1/groups/acme/web/-/environments",
         {"name": "reviewed", "env_type": "staging", "labels": {"policy": "warn"}, "approval": "required"})


def runner_check_follows_rights(b, c):
    b.open("/groups/acme")
    b.loaded("group", group="acme")
    b.find(css("runners") + " " + css("runner"))
    c.check(not b.has(css("runner-check") + ":not([disabled])"),
            "group page (carol, a deployer): no enabled runner check")
    denied = b.find(css("runner-check-denied")).get_attribute("textContent")
    c.check("maintainer" in denied, f"group page (carol): says the runner check needs the maintainer role: {denied!r}")


def api_message_as_code(b, c):
    b.open(f"/jobs/{MISSING_JOB}")
    b.loaded("job", job=MISSING_JOB)
    banner = b.find(css("error"))
    text = banner.get_attribute("textContent")
    c.check("`" not in text, f"job page (missing): the API's message shows no literal backtick: {text!r}")
    c.check(bool(banner.find_elements("css selector", "code")), f"job page (missing): names shown as code: {text!r}")


def state_of(b):
    el = b.find(css("job-state"))
    return el.get_attribute("data-state"), el.get_attribute("textContent").strip()


def denied_apply(b, c, alice, wait_job, shots, safety):
    job = call(alice, "POST", f"/v1/environments/{GATED}/-/jobs", apply_body(1, ticks=1))
    failed = wait_job(alice, job["id"], {"failed"})
    c.check((failed.get("policy") or {}).get("status") == "denied", f"API: the gated apply was denied: {failed.get('policy')}")
    b.open(f"/jobs/{job['id']}")
    b.loaded("job", job=job["id"])
    b.until("the denied apply's plan", lambda d: b.has(css("plan-summary")) or b.has(css("plan-absent")), 20)
    c.check(b.has(css("plan-summary")) and not b.has(css("plan-absent")),
            "job page (policy-denied apply): its plan is shown, not 'no plan'")
    c.check(b.has(css("plan-resource", address="terraform_data.note")), "job page (denied): the denied diff lists terraform_data.note")
    c.check(state_of(b) == ("failed", "failed"), f"job page (denied): state {state_of(b)}")
    c.check(b.find(css("policy-status")).text == "denied", "job page (denied): policy denied shown")
    b.screenshot(shots, "job-denied")
    safety(b, c, "job page (policy-denied apply)")
    b.open(f"/env/{GATED}")
    b.loaded("env", path=GATED)
    policy = b.find(css("env-policy", name="no-create"), 20)
    c.check(policy.get_attribute("data-enforcement") == "mandatory" and policy.get_attribute("data-group") == "acme",
            "env page: the mandatory set of acme is in force")
    c.check(not b.has(css("env-policy", name="advise")), "env page: a set whose criteria do not match is not listed")
    expiry = b.find(css("env-expiry"))
    c.check(expiry.get_attribute("data-source") is not None, f"env page: the expiry says where it comes from: {expiry.text!r}")
    row = b.find(css("job-row", job=job["id"]), 20)
    counts = row.find_element("css selector", css("job-counts")).text.strip()
    c.check(bool(COUNTS.match(counts)), f"env jobs: the change summary in the row: {counts!r}")
    reason = row.find_element("css selector", css("job-reason"))
    full = reason.get_attribute("title")
    c.check(full.startswith("policy_denied") and IMG in full, f"env jobs: the failure reason in full as the title: {full!r}")
    c.check(reason.text.startswith("policy_denied") and len(reason.text) <= 80,
            f"env jobs: the failure reason, cut: {reason.text!r}")
    c.check(not reason.find_elements("css selector", "img"), "env jobs: the reason's markup stays text")
    b.screenshot(shots, "env-reviewer")
    safety(b, c, "env page (gated)")


def approve_dialog(b, c, alice, admin, wait_job, shots, safety):
    job = call(alice, "POST", f"/v1/environments/{REVIEWED}/-/jobs", apply_body(1, ticks=1))
    wait_job(alice, job["id"], {"awaiting_approval"})
    b.open(f"/jobs/{job['id']}")
    b.loaded("job", job=job["id"])
    c.check(state_of(b) == ("awaiting_approval", "awaiting approval"), f"job page: the state in words: {state_of(b)}")
    timeline = b.find(css("timeline")).get_attribute("textContent")
    c.check("awaiting_approval" not in timeline and "awaiting approval" in timeline,
            f"timeline: states in words: {timeline[-300:]!r}")
    b.find(css("approve") + ":not([disabled])").click()
    b.until("the approve dialog", lambda d: b.js(f"return !!document.querySelector('{css('decide-dialog')}')?.open"))
    facts = {k: b.text(css(f"decide-{k}")) for k in ("env", "requester", "counts", "policy")}
    c.check(facts["env"] == REVIEWED, f"approve dialog: names the environment: {facts}")
    c.check(facts["requester"] == "alice", f"approve dialog: names the requester: {facts}")
    c.check(bool(COUNTS.match(facts["counts"])), f"approve dialog: the counts: {facts}")
    c.check(facts["policy"].startswith("warned") and "acme/advise" in facts["policy"],
            f"approve dialog: the policy result: {facts}")
    b.screenshot(shots, "approve-dialog", whole=False)
    b.find(css("decide-cancel")).click()
    b.until("the dialog to close", lambda d: not b.js(f"return !!document.querySelector('{css('decide-dialog')}')?.open"), 5)
    safety(b, c, "job page (approve dialog)")
    call(admin, "POST", f"/v1/jobs/{job['id']}/discard", {})


def review(b, c, admin, alice, wait_job, shots, safety):
    """Runs with carol signed in."""
    runner_check_follows_rights(b, c)
    api_message_as_code(b, c)
    world(admin)
    denied_apply(b, c, alice, wait_job, shots, safety)
    approve_dialog(b, c, alice, admin, wait_job, shots, safety)
