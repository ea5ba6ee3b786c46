"""The console test's audit step (scripts/console_test.py): the audit page
(crates/console/assets/pages/audit.js), against the same `sortie dev`.

alice (an owner of `acme`) follows the group page's "Audit trail" link: the changes the
scenario made are listed newest first, each with who, the action and its target; a filter
by action keeps only its entries (and stays in the address); "Verify chain" recomputes the
chain in the browser and says it verifies once the sweeper has sealed the entries. carol (a
deployer) sees no link, and the page answers her with the API's refusal. Hostile values
(a runner's name is safe, but the user agent and targets are the caller's) stay text.
"""

from console_browser import css, wait_poll

GROUP = "acme"
# carol's visit: the API refuses her the trail (403), as the page then says.
ALLOWED = [r"/v1/orgs/acme/-/audit(\?[^ ]*)? - Failed to load resource: "
           r"the server responded with a status of 403"]


def audit(b, c, admin, users, shots, safety, sign_in, sign_out):
    # The sweeper seals entries a minute after they are written (the console test's
    # `sortie dev` seals after a second: --audit-settle 1).
    wait_poll(lambda: not [e for e in admin.call("GET", f"/v1/orgs/{GROUP}/-/audit?limit=1000")["entries"]
                           if "seal" not in e], 60, what="every audit entry of acme sealed")
    sign_out(b)
    sign_in(b, users["alice"], "alice")
    b.open(f"/groups/{GROUP}")
    b.loaded("group", group=GROUP)
    b.find(css("audit-link")).click()
    b.until("the audit page", lambda d: b.has(css("audit-page") + "[data-loaded=true]"))
    rows = b.all(css("audit-entry"))
    actions = [r.get_attribute("data-action") for r in rows]
    c.check(len(rows) >= 5 and "create_runner" in actions and "grant_membership" in actions,
            f"audit: the scenario's changes are listed: {actions[:12]}")
    text = b.find(css("audit-page")).get_attribute("textContent")
    c.check("/v1/groups/acme/-/runners/" in text, "audit: an entry names its target")

    # Filter by action: kept in the address.
    box = b.find(css("audit-action"))
    box.send_keys("lock_environment")
    box.submit()
    b.until("the filtered list", lambda d: "action=lock_environment" in b.driver.current_url
            and b.has(css("audit-page") + "[data-loaded=true]")
            and all(r.get_attribute("data-action") == "lock_environment" for r in b.all(css("audit-entry"))))
    c.check(len(b.all(css("audit-entry"))) >= 1, "audit: the filter keeps the lock's entries")

    b.find(css("audit-verify")).click()
    said = b.find(css("audit-verified"))
    b.until("the verification", lambda d: "verifies" in said.text or "broken" in said.text)
    c.check(said.get_attribute("data-ok") == "true" and "verifies" in said.text,
            f"audit: the chain verifies in the browser: {said.text!r}")
    b.screenshot(shots, "audit")
    safety(b, c, "audit page (alice)")

    # carol deploys: no link, and the page says the API refused.
    sign_out(b)
    sign_in(b, users["carol"], "carol")
    b.open(f"/groups/{GROUP}")
    b.loaded("group", group=GROUP)
    c.check(not b.has(css("audit-link")), "audit: no link for carol (a deployer)")
    b.open(f"/audit/{GROUP}")
    b.until("carol's refusal", lambda d: b.has(css("audit-page") + "[data-loaded=true]"))
    c.check("owner" in b.find(css("audit-page")).get_attribute("textContent"),
            "audit: carol is told the owner role reads it")
    safety(b, c, "audit page (carol)")
