#!/usr/bin/env python3
"""The web chat page at / (src/serve/webui/index.html), driven in headless
Chromium (Debian's chromium and chromium-driver, through PyPI selenium) on the
real Gemma 3 270M Q4_K_M.

  python3 tests/serve/webui_test.py MINFER_BINARY

Checks: GET / and /index.html are the page with its Content-Security-Policy
and nosniff headers; in the browser the model's id appears, a message sent
with Enter (Shift+Enter is a new line) gets a reply that grows while it streams and a tokens/s readout, a
second turn sends the whole conversation (system prompt included), and Stop
during a long reply ends it (the text stops growing, the server has no
sequence running soon after); no console errors, no request to any host but
the server, no CSP violation (and the CSP does block one). With --api-key the
page loads without the key and works once it is typed in; --no-webui makes /
a 404. A screenshot goes to $MINFER_TEST_ARTIFACTS/webui.png
(/tmp/minfer-test-artifacts by default).
"""
import json
import os
import re
import sys
import time

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from serve_testutil import Server, check, finish, gemma_path

CSP = ("default-src 'self'; style-src 'self' 'unsafe-inline'; "
       "script-src 'self' 'unsafe-inline'; connect-src 'self'")
# Records CSP violations in the page, from before its own script runs.
WATCH_CSP = """
window.__csp = [];
document.addEventListener('securitypolicyviolation',
    (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


def browser():
    """Headless Chromium on the system's chromedriver (Selenium downloads nothing)."""
    os.environ.setdefault("SE_OFFLINE", "true")
    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("MINFER_CHROMIUM", "/usr/bin/chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1200,860", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(
        service=Service(os.environ.get("MINFER_CHROMEDRIVER", "/usr/bin/chromedriver")),
        options=opts)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_CSP})
    return driver


def wait_for(what, cond, timeout=60, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    check(False, f"timed out waiting for {what}")
    return None


def last_reply(driver):
    return driver.execute_script("""
        const all = document.querySelectorAll('#log .msg.assistant');
        const m = all[all.length - 1];
        return m ? {text: m.querySelector('.content').textContent,
                    note: m.querySelector('.note').textContent,
                    streaming: m.classList.contains('streaming')} : null;""")


def set_field(driver, element_id, value):
    """Sets an input as a user would (its input and change events fire)."""
    driver.execute_script("""
        const el = document.getElementById(arguments[0]);
        el.value = arguments[1];
        el.dispatchEvent(new Event('input'));
        el.dispatchEvent(new Event('change'));""", element_id, value)


def idle(driver):
    return driver.execute_script(
        "return !document.getElementById('send').disabled &&"
        " document.getElementById('stop').disabled;")


def send_and_watch(driver, text):
    """Types `text`, presses Enter, and samples the reply until it ends:
    returns the distinct lengths seen while it streamed, and the reply."""
    box = driver.find_element(By.ID, "input")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)
    lengths = []
    deadline = time.time() + 120
    while time.time() < deadline:
        r = last_reply(driver)
        if r and r["streaming"] and r["text"] and (not lengths or lengths[-1] != len(r["text"])):
            lengths.append(len(r["text"]))
        if r and not r["streaming"] and idle(driver):
            return lengths, r
        time.sleep(0.02)
    check(False, f"the reply to {text!r} did not end")
    return lengths, last_reply(driver)


def running_sequences(srv):
    status, body = srv.raw("GET", "/metrics")
    m = re.search(rb"^minfer_sequences_running (\d+)", body, re.M)
    return int(m.group(1)) if status == 200 and m else -1


def chat_requests(perf_log):
    """The POST bodies of /v1/chat/completions in a performance log."""
    bodies = []
    for e in perf_log:
        msg = json.loads(e["message"])["message"]
        if msg["method"] != "Network.requestWillBeSent":
            continue
        req = msg["params"]["request"]
        if req["url"].endswith("/v1/chat/completions") and req.get("postData"):
            bodies.append(json.loads(req["postData"]))
    return bodies


def page_over_http(model):
    srv = Server(model)
    try:
        status, body = srv.raw("GET", "/")
        check(status == 200 and body.startswith(b"<!DOCTYPE html>"), f"GET /: {status}")
        check(srv.headers.get("content-type") == "text/html; charset=utf-8",
              f"content type {srv.headers.get('content-type')}")
        check(srv.headers.get("content-security-policy") == CSP,
              f"CSP {srv.headers.get('content-security-policy')}")
        check(srv.headers.get("x-content-type-options") == "nosniff", "nosniff")
        status, again = srv.raw("GET", "/index.html")
        check(status == 200 and again == body, "/index.html is the same page")
        # Self-contained: no URL to another host anywhere in it.
        check(not re.search(rb"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", body, re.I),
              "the page names another host")
    finally:
        srv.stop()


def chat_in_browser(model, artifacts):
    srv = Server(model)
    driver = browser()
    try:
        driver.get(srv.url + "/")
        wait_for("the model's id", lambda: driver.find_element(By.ID, "model").text == "gemma-test")
        set_field(driver, "temperature", "0")
        set_field(driver, "max-tokens", "80")
        set_field(driver, "system", "You are a helpful assistant.")

        # One turn: the reply grows over several observations, then ends.
        lengths, r = send_and_watch(driver, "Tell me about the Moon in three sentences.")
        check(len(lengths) >= 2, f"the reply did not stream: lengths {lengths}")
        check(r and r["text"].strip(), f"empty reply {r}")
        check(r and (not lengths or lengths[-1] <= len(r["text"])), "the reply shrank")
        stats = driver.find_element(By.ID, "stats").text
        m = re.search(r"(\d+(?:\.\d+)?) tok/s", stats)
        check(m and float(m.group(1)) > 0, f"no tokens/s readout: {stats!r}")
        print(f"first reply: {len(r['text'])} chars, {len(lengths)} observations; {stats}")

        # A second turn carries the conversation.
        _, r2 = send_and_watch(driver, "And the Sun?")
        check(r2 and r2["text"].strip(), f"empty second reply {r2}")
        n_msgs = len(driver.find_elements(By.CSS_SELECTOR, "#log .msg"))
        check(n_msgs == 4, f"{n_msgs} messages in the log after two turns")
        bodies = chat_requests(driver.get_log("performance"))
        check(len(bodies) == 2, f"{len(bodies)} chat requests")
        if len(bodies) == 2:
            roles = [mm["role"] for mm in bodies[1]["messages"]]
            check(roles == ["system", "user", "assistant", "user"], f"second request: {roles}")
            check(bodies[1]["messages"][2]["content"] == r["text"], "the first reply, resent")
            check(bodies[0]["stream"] is True and bodies[0]["temperature"] == 0 and
                  bodies[0]["max_tokens"] == 80, f"request fields {bodies[0]}")

        # Stop during a long reply.
        set_field(driver, "max-tokens", "2000")
        box = driver.find_element(By.ID, "input")
        box.send_keys("Count from 1 to 2000, one number per line.")
        box.send_keys(Keys.ENTER)
        wait_for("a long reply to get going",
                 lambda: (last_reply(driver) or {}).get("text", "").count("\n") >= 10
                 or not (last_reply(driver) or {}).get("streaming", True), timeout=60)
        was = last_reply(driver)
        check(was and was["streaming"], f"the long reply ended by itself: {was}")
        check(running_sequences(srv) == 1, "no sequence running before Stop")
        driver.find_element(By.ID, "stop").click()
        wait_for("the page to go idle", lambda: idle(driver), timeout=10)
        stopped = last_reply(driver)
        time.sleep(1.0)
        later = last_reply(driver)
        check(stopped and later and stopped["text"] == later["text"],
              "the reply kept growing after Stop")
        check(later and later["note"] == "(stopped)" and not later["streaming"],
              f"after Stop: {later}")
        check(wait_for("the server to cancel", lambda: running_sequences(srv) == 0, timeout=10),
              "a sequence still running after Stop")
        print(f"stopped at {len(later['text'])} chars" if later else "no reply")

        os.makedirs(artifacts, exist_ok=True)
        shot = os.path.join(artifacts, "webui.png")
        check(driver.save_screenshot(shot), "screenshot")
        print("screenshot:", shot)

        # Nothing went wrong in the page, and it reached no other host.
        # (Chromium's own /favicon.ico request gets a 204: no error either.)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        check(not errors, f"console errors: {errors}")
        foreign = []
        for e in driver.get_log("performance"):
            msg = json.loads(e["message"])["message"]
            if msg["method"] == "Network.requestWillBeSent":
                url = msg["params"]["request"]["url"]
                if not url.startswith(srv.url + "/") and not url.startswith("data:"):
                    foreign.append(url)
        check(not foreign, f"requests to other hosts: {foreign}")
        check(driver.execute_script("return window.__csp") == [], "CSP violations")
        # The policy itself: a fetch to another host is refused.
        blocked = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('http://192.0.2.1/x').then(() => done(false), () => done(true));""")
        check(blocked and driver.execute_script("return window.__csp.length") == 1,
              "the CSP let a fetch to another host through")
    finally:
        driver.quit()
        srv.stop()


def api_key_in_browser(model):
    srv = Server(model, "--api-key", "sekret")
    driver = browser()
    try:
        status, _ = srv.raw("GET", "/")
        check(status == 200, f"the page needs no key: {status}")
        status, _ = srv.raw("GET", "/v1/models")
        check(status == 401, f"/v1/models without a key: {status}")
        driver.get(srv.url + "/")
        wait_for("the missing key's error", lambda: "API key" in driver.find_element(
            By.ID, "error").text)
        set_field(driver, "api-key", "sekret")
        wait_for("the model's id with the key",
                 lambda: driver.find_element(By.ID, "model").text == "gemma-test")
        check(driver.find_element(By.ID, "error").text == "", "the error stays after the key")
        set_field(driver, "max-tokens", "8")
        # Shift+Enter is a new line, not a send.
        box = driver.find_element(By.ID, "input")
        box.send_keys("Hi" + Keys.SHIFT + Keys.ENTER + Keys.NULL + "there")
        check(box.get_attribute("value") == "Hi\nthere", f"input {box.get_attribute('value')!r}")
        check(not driver.find_elements(By.CSS_SELECTOR, "#log .msg"), "Shift+Enter sent")
        _, r = send_and_watch(driver, "")
        check(r and r["text"], f"no reply with the key: {r}")
        sent = driver.execute_script("return document.querySelector('#log .msg.user .content')"
                                     ".textContent")
        check(sent == "Hi\nthere", f"the message sent: {sent!r}")
    finally:
        driver.quit()
        srv.stop()


def no_webui(model):
    srv = Server(model, "--no-webui", "--api-key", "sekret")
    try:
        status, body = srv.raw("GET", "/", headers={"Authorization": "Bearer sekret"})
        check(status == 404, f"--no-webui: GET / is {status}")
        status, _ = srv.raw("GET", "/")
        check(status == 401, f"--no-webui: GET / without the key is {status}, not 401")
    finally:
        srv.stop()


def main():
    model = gemma_path()
    artifacts = os.environ.get("MINFER_TEST_ARTIFACTS", "/tmp/minfer-test-artifacts")
    try:
        page_over_http(model)
        chat_in_browser(model, artifacts)
        api_key_in_browser(model)
        no_webui(model)
    except WebDriverException as e:
        check(False, f"the browser failed: {e.msg}")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
