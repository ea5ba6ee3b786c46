"""Headless Chromium for scripts/console_test.py: the Debian `chromium` and its
`/usr/bin/chromedriver` (pinned by scripts/requirements-browser.txt, installed by
scripts/tools.sh), driven by Selenium (scripts/requirements-tools.txt). Selenium Manager is
never used: the driver's path is given, so nothing is downloaded.

- `Browser`: one headless window (1280x900) with the browser log kept (`goog:loggingPrefs`),
  explicit waits on the console's DOM contract (`data-test`, `data-loaded`), and the browser
  log sorted into problems (JS errors, CSP violations, failed requests).
"""

import os
import re
import time

from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"


def css(test, **attrs):
    """The CSS selector of `[data-test=test]` with the given `data-*` attributes."""
    sel = f'[data-test="{test}"]'
    for name, value in attrs.items():
        sel += f'[data-{name.replace("_", "-")}="{value}"]'
    return sel


class Browser:
    """One headless Chromium window on the console at `base` (ends with `/`)."""

    def __init__(self, base, wait_s=20):
        for path in (CHROMEDRIVER, CHROMIUM):
            if not os.path.exists(path):
                raise SystemExit(f"console test: {path} is missing: run scripts/tools.sh "
                                 "(it installs chromium and chromium-driver from Debian)")
        self.base = base
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1280,900", "--no-first-run", "--no-default-browser-check",
                    "--disable-extensions", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--metrics-recording-only",
                    "--password-store=basic"):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        log_path = os.environ.get("CONSOLE_TEST_DRIVER_LOG", os.devnull)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER, log_output=log_path), options=opts)
        self.driver.set_window_size(1280, 900)
        self.driver.set_page_load_timeout(30)
        self.driver.set_script_timeout(30)
        self.wait_s = wait_s
        self.log = []  # every browser log entry seen: (page, entry)
        self.page = "start"

    def quit(self):
        try:
            self.driver.quit()
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass

    # --- navigation and waits -------------------------------------------------------------

    def open(self, route, fresh=False):
        """Loads `#<route>`; `fresh` goes through about:blank first, so the page loads anew."""
        self.collect_log()
        self.page = route
        if fresh:
            self.driver.get("about:blank")
        self.driver.get(self.base + "#" + route)

    def until(self, what, fn, timeout=None):
        """Waits (polling) until `fn(driver)` is truthy; fails naming `what`."""
        try:
            return WebDriverWait(self.driver, timeout or self.wait_s, poll_frequency=0.05,
                                 ignored_exceptions=(NoSuchElementException,
                                                     StaleElementReferenceException)).until(fn)
        except TimeoutException:
            raise AssertionError(f"timed out after {timeout or self.wait_s}s waiting for {what} "
                                 f"(page {self.page}, url {self.driver.current_url})") from None

    def find(self, selector, timeout=None):
        """The first element matching the CSS `selector`, waited for."""
        return self.until(selector, lambda d: d.find_element(By.CSS_SELECTOR, selector), timeout)

    def all(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def has(self, selector):
        return bool(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def loaded(self, page, timeout=None, **attrs):
        """The root of `<page>-page` once it has `data-loaded=true`."""
        sel = css(f"{page}-page", **attrs) + '[data-loaded="true"]'
        return self.find(sel, timeout)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def text(self, selector):
        return self.find(selector).text

    def state(self):
        """The job page's state, its exact API word (`data-state`; the page shows it in words)."""
        return self.find(css("job-state")).get_attribute("data-state")

    def screenshot(self, directory, name, whole=True):
        """`<directory>/<name>.png`: the whole page from its top (at most 2400 pixels high),
        or with `whole=False` the window as it is (a modal dialog)."""
        if not directory:
            return
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, name + ".png")
        if not whole:
            self.driver.save_screenshot(path)
            return
        height = self.js("window.scrollTo(0, 0); return document.documentElement.scrollHeight")
        self.driver.set_window_size(1280, max(900, min(int(height) + 140, 2400)))
        try:
            self.driver.save_screenshot(path)
        finally:
            self.driver.set_window_size(1280, 900)

    # --- safety probes --------------------------------------------------------------------

    def alert_open(self):
        try:
            self.driver.switch_to.alert.text  # noqa: B018 - raises when there is none
            return True
        except NoAlertPresentException:
            return False

    def pwned(self):
        """What `window.__pwned` is (None when undefined, as it must stay)."""
        return self.js("return typeof window.__pwned === 'undefined' ? null : String(window.__pwned)")

    def data_markup(self):
        """Elements that only hostile data could have made: script elements other than the
        console's own module, any <img>, and javascript: links."""
        return self.js("""
            const out = [];
            for (const s of document.querySelectorAll('script')) {
              if (!(s.type === 'module' && s.src && s.src.includes('/assets/'))) out.push('script: ' + s.outerHTML.slice(0, 120));
            }
            for (const i of document.querySelectorAll('img')) out.push('img: ' + i.outerHTML.slice(0, 120));
            for (const a of document.querySelectorAll('a[href^="javascript" i], [href^=" javascript" i]')) out.push('a: ' + a.outerHTML.slice(0, 120));
            for (const e of document.querySelectorAll('[onerror], [onload], [onclick]')) out.push('handler: ' + e.outerHTML.slice(0, 120));
            for (const e of document.querySelectorAll('[style]')) out.push('style: ' + e.outerHTML.slice(0, 120));
            return out;
        """)

    # --- the browser log ------------------------------------------------------------------

    def collect_log(self):
        """Moves the browser's new log entries into `self.log`, tagged with the page."""
        try:
            entries = self.driver.get_log("browser")
        except Exception:  # noqa: BLE001 - a closed window has no log
            return
        for e in entries:
            self.log.append((self.page, e))

    def problems(self, allowed=()):
        """Browser log entries that are errors: SEVERE ones and CSP violations, except those
        matching one of the `allowed` regular expressions."""
        self.collect_log()
        out = []
        for page, e in self.log:
            msg = e.get("message", "")
            csp = "Content Security Policy" in msg or "Content-Security-Policy" in msg
            if e.get("level") == "SEVERE" or csp:
                if not csp and any(re.search(a, msg) for a in allowed):
                    continue
                out.append(f"[{page}] {e.get('level')}: {msg}")
        return out


def wait_poll(fn, timeout, step=0.2, what="a condition"):
    """Polls `fn()` (no browser) until truthy, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)
