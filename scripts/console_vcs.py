"""The console test's pull-request step (scripts/console_test.py): the environment page's
"Pull requests" card (crates/console/assets/pages/env_vcs.js), against the same `sortie dev`.

bob (a maintainer: PATCH /v1/environments/{path} needs `manage`) binds `acme/web/review` to
a repository through the card's form, from the keyboard where it matters: a bad repository
(`not a repo`) shows the API's problem next to the repository input and nothing is saved;
the fixed one is saved and the card says it in words (the hostile directory and glob as
text); a change made meanwhile through the API is reported and reloaded, and saving again
works; removing the binding asks first, then works. carol (a deployer) sees the binding in
words, and no form, no bind, edit or remove button.
"""

import os

from console_browser import css
from console_scenario import IMG, SCRIPT
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.select import Select

ENV = "acme/web/review"
REPO = "acme/infrastructure"
# The browser logs the PATCH answers this step provokes on purpose (a 400, a 412).
ALLOWED = [r"/v1/environments/acme%2Fweb%2Freview - Failed to load resource: "
           r"the server responded with a status of (400|412)"]


def binding(api):
    """The environment's `vcs` as the API has it (None when unbound)."""
    return api.call("GET", f"/v1/environments/{ENV}").get("vcs")


def card_text(b):
    return b.find(css("env-vcs")).get_attribute("textContent")


def bound(b, value):
    want = "true" if value else "false"
    b.until(f"the pull-request card to be bound={want}",
            lambda d: b.find(css("env-vcs")).get_attribute("data-bound") == want)


def retype(el, text):
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.BACKSPACE)
    if text:
        el.send_keys(text)


def focused(b):
    return b.js("return document.activeElement && document.activeElement.dataset.test")


def card_shot(b, shots, name):
    """`<shots>/<name>.png`: the card alone."""
    if not shots:
        return
    os.makedirs(shots, exist_ok=True)
    el = b.find(css("env-vcs"))
    height = b.js("return arguments[0].getBoundingClientRect().height", el)
    b.driver.set_window_size(1280, max(900, min(int(height) + 300, 2400)))
    try:
        b.js("arguments[0].scrollIntoView({block: 'center'})", el)
        el.screenshot(os.path.join(shots, name + ".png"))
    finally:
        b.driver.set_window_size(1280, 900)


def bind_through_the_form(b, c, admin, shots):
    b.open(f"/env/{ENV}")
    b.loaded("env", path=ENV)
    bound(b, False)
    c.check("Not bound to a repository" in card_text(b), "vcs card: says it is not bound")
    # From the keyboard: Enter on the bind button opens the form with focus on the repository.
    b.find(css("vcs-bind")).send_keys(Keys.ENTER)
    b.find(css("vcs-form"))
    b.until("focus on the repository input", lambda d: focused(b) == "vcs-repository", 5)
    unlabelled = b.js("""return [...document.querySelectorAll('[data-test="vcs-form"] :is(input, select, textarea)')]
        .filter(e => !e.labels || e.labels.length === 0 || !e.labels[0].textContent.trim()).map(e => e.id)""")
    c.check(not unlabelled, f"vcs form: every input has a label (unlabelled: {unlabelled})")
    b.find(css("vcs-repository")).send_keys("not a repo")
    b.find(css("vcs-directory")).send_keys(IMG)
    globs = b.find(css("vcs-when_modified"))
    globs.send_keys(f"  {SCRIPT}  ", Keys.ENTER, Keys.ENTER, " modules/**")
    Select(b.find(css("vcs-apply"))).select_by_value("before_merge")
    b.find(css("vcs-approved")).send_keys("1")
    b.find(css("vcs-mergeable")).send_keys(Keys.SPACE)
    b.find(css("vcs-save")).click()
    err = b.find(css("vcs-field-error", field="repository"))
    c.check("owner/name" in err.text, f"vcs form: the API's problem is shown by the repository: {err.text!r}")
    repo = b.find(css("vcs-repository"))
    c.check(repo.get_attribute("aria-invalid") == "true"
            and repo.get_attribute("aria-describedby") == err.get_attribute("id"),
            "vcs form: the repository input is marked invalid and described by the problem")
    c.check(focused(b) == "vcs-repository", f"vcs form: focus back on the repository (on {focused(b)!r})")
    c.check(binding(admin) is None, "vcs form: a refused binding saved nothing")
    card_shot(b, shots, "env-vcs-form")
    retype(repo, REPO)
    b.find(css("vcs-save")).send_keys(Keys.ENTER)
    bound(b, True)
    got = binding(admin) or {}
    want = {"repository": REPO, "directory": IMG, "when_modified": [SCRIPT, "modules/**"],
            "apply": "before_merge", "requirements": {"approved": 1, "mergeable": True}}
    c.check(got == want, f"vcs: the API has the binding the form sent: {got!r}")
    link = b.find(css("vcs-repository-link"))
    c.check(link.get_attribute("href") == f"https://github.com/{REPO}", f"vcs card: repository link {link.get_attribute('href')!r}")
    text = card_text(b)
    for words in (REPO, IMG, SCRIPT, "modules/**", "main", "with /sortie apply before merge",
                  "1 approval by someone other than the author", "mergeable"):
        c.check(words in text, f"vcs card: says {words!r}: {text[:400]!r}")
    c.check(focused(b) == "vcs-edit", f"vcs card: focus back on the edit button (on {focused(b)!r})")
    card_shot(b, shots, "env-vcs")


def moved_meanwhile(b, c, admin):
    """The environment changes under the open form: Save says so and reloads; Save again works."""
    b.find(css("vcs-edit")).click()
    b.find(css("vcs-form"))
    admin.call("PATCH", f"/v1/environments/{ENV}", {"vcs": {"repository": REPO, "branch": "release"}})
    b.find(css("vcs-undiverged")).click()
    b.find(css("vcs-save")).click()
    notice = b.find(css("vcs-moved"))
    c.check("changed" in notice.text, f"vcs form: a version that moved is reported: {notice.text!r}")
    c.check(b.has(css("vcs-form")), "vcs form: stays open, with what was typed, after a version moved")
    b.loaded("env", path=ENV)  # reloaded: the form now sends the new version
    b.find(css("vcs-save")).click()
    b.until("the second save", lambda d: not b.has(css("vcs-form")))
    got = binding(admin) or {}
    c.check(got.get("requirements", {}).get("undiverged") is True and "branch" not in got,
            f"vcs: saved again after the reload: {got!r}")
    c.check("not behind its base branch" in card_text(b), "vcs card: says not behind its base branch")


def a_gitlab_binding_stays_gitlabs(b, c, admin):
    """A binding on GitLab, edited in the console: saved, it is still GitLab's (the API's
    default host is GitHub), the card names the host, and the project is no github.com link."""
    project = "acme/platform/infra"
    admin.call("PATCH", f"/v1/environments/{ENV}", {"vcs": {"provider": "gitlab", "repository": project}})
    b.open(f"/env/{ENV}", fresh=True)
    b.loaded("env", path=ENV)
    text = card_text(b)
    c.check("GitLab" in text and project in text, f"vcs card: names GitLab and the project: {text[:300]!r}")
    c.check(not b.has(css("vcs-repository-link")), "vcs card: a GitLab project is not linked to github.com")
    b.find(css("vcs-edit")).click()
    b.find(css("vcs-form"))
    host = Select(b.find(css("vcs-provider")))
    c.check(host.first_selected_option.get_attribute("value") == "gitlab", "vcs form: the host is GitLab")
    b.find(css("vcs-undiverged")).click()
    b.find(css("vcs-save")).click()
    b.until("the GitLab binding saved", lambda d: not b.has(css("vcs-form")))
    got = binding(admin) or {}
    c.check(got.get("provider") == "gitlab" and got.get("repository") == project
            and got.get("requirements", {}).get("undiverged") is True,
            f"vcs: saved from the console, still GitLab's: {got!r}")


def remove(b, c, admin):
    b.find(css("vcs-remove")).click()
    b.find(css("vcs-remove-ask"))
    b.until("focus on the confirm button", lambda d: focused(b) == "vcs-remove-confirm", 5)
    b.find(css("vcs-remove-keep")).click()
    c.check(binding(admin) is not None and not b.has(css("vcs-remove-ask")), "vcs: Keep it keeps the binding")
    b.find(css("vcs-remove")).click()
    b.find(css("vcs-remove-confirm")).send_keys(Keys.ENTER)
    bound(b, False)
    c.check(binding(admin) is None, "vcs: the binding is removed (the API has none)")
    c.check(b.has(css("vcs-bind")), "vcs card: unbound, the bind button is back")


def pull_requests(b, c, admin, users, shots, safety, sign_in, sign_out):
    bind_through_the_form(b, c, admin, shots)
    moved_meanwhile(b, c, admin)
    a_gitlab_binding_stays_gitlabs(b, c, admin)
    remove(b, c, admin)
    safety(b, c, "env page (pull requests, bob)")
    # carol deploys but does not manage: the binding in words, and nothing to change it with.
    admin.call("PATCH", f"/v1/environments/{ENV}", {"vcs": {"repository": REPO, "directory": IMG}})
    sign_out(b)
    sign_in(b, users["carol"], "carol")
    b.open(f"/env/{ENV}")
    b.loaded("env", path=ENV)
    bound(b, True)
    c.check(IMG in card_text(b), "vcs card (carol): the binding in words")
    for part in ("vcs-form", "vcs-bind", "vcs-edit", "vcs-remove"):
        c.check(not b.has(css(part)), f"vcs card (carol, a deployer): no [data-test={part}]")
    safety(b, c, "env page (pull requests, carol)")
