"""`turbokv serve`'s chat page at / in headless Chromium (Debian `chromium` and
`chromium-driver`, driven by Debian's `python3-selenium`), against a server on
SmolLM2-135M with the turbo KV cache: the page shows the model and the scheme, a
message sent from the input gets a reply rendered as it streams (the reply's text
is seen at two or more lengths while Stop is enabled), the tok/s display shows a
positive number, and Stop on a long reply ends it (the text stops growing, the
server counts the request as cancelled). A screenshot of the first exchange is
saved in OUTDIR (a test artifact; docs/img/chat-page.png is one of these).
usage: web_page_test.py TURBOKV_BINARY OUTDIR"""
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from serverlib import Server  # noqa: E402

# CTest's SKIP_RETURN_CODE for this test (tests/server/CMakeLists.txt).
SKIP = 77
# Bound of every wait on the page: the CI also runs this under ASan (~10x slower).
WAIT_S = 120
# Kept small for the same reason: 32 tokens take a few seconds even under ASan.
SHORT_MAX_TOKENS = 32
LONG_MAX_TOKENS = 400


def missing_tools():
    """Chromium, its driver and selenium; what is missing, in words."""
    missing = []
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append(f"selenium for {sys.executable} (Debian: python3-selenium)")
    if not shutil.which("chromium"):
        missing.append("chromium (Debian: chromium)")
    if not shutil.which("chromedriver"):
        missing.append("chromedriver (Debian: chromium-driver)")
    return missing


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def wait_for(what, pred, timeout=WAIT_S, interval=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(interval)
    fail(f"timed out after {timeout} s waiting for {what}")


# Records every change of the last assistant message as [length, Stop enabled],
# so streaming is observed in the page itself, not by how often we poll it.
OBSERVE = """
window.tkvSeen = [];
const log = document.getElementById('log');
new MutationObserver(() => {
  const msgs = log.querySelectorAll('.msg.assistant');
  if (!msgs.length) return;
  const n = msgs[msgs.length - 1].textContent.length;
  const seen = window.tkvSeen;
  if (!seen.length || seen[seen.length - 1][0] !== n)
    seen.push([n, !document.getElementById('stop').disabled]);
}).observe(log, {childList: true, subtree: true, characterData: true});
"""

# [text of the last assistant message, Stop enabled, Send enabled, tok/s text, errors]
STATE = """
const msgs = document.querySelectorAll('#log .msg.assistant');
return [msgs.length ? msgs[msgs.length - 1].textContent : null,
        !document.getElementById('stop').disabled,
        !document.getElementById('send').disabled,
        document.getElementById('speed').textContent,
        Array.from(document.querySelectorAll('#log .msg.error')).map(e => e.textContent)];
"""


def set_value(driver, element_id, value):
    el = driver.find_element("id", element_id)
    el.clear()
    el.send_keys(str(value))


def send_message(driver, text):
    driver.execute_script(OBSERVE)
    driver.find_element("id", "input").send_keys(text)
    driver.find_element("id", "send").click()


def start_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    driver.set_window_size(1280, 900)
    driver.set_page_load_timeout(WAIT_S)
    return driver


def exchange(driver, srv, outdir):
    """Loads /, sends a short message and checks the streamed reply; saves the screenshot."""
    driver.get(srv.base_url + "/")
    check(driver.title == "turbokv chat", f"title of / is {driver.title!r}")
    scheme = wait_for("the scheme in the header", lambda: (
        t := driver.find_element("id", "scheme").text) != "kv: ?" and t)
    check(re.fullmatch(r"kv: turbo\S* \(\d+ B/token\)", scheme), f"scheme shown as {scheme!r}")
    model = driver.find_element("id", "model").text
    check("SmolLM2" in model, f"model shown as {model!r}")
    print(f"page header: {model} | {scheme}", flush=True)

    set_value(driver, "temp", 0)
    set_value(driver, "maxtok", SHORT_MAX_TOKENS)
    question = "Write a short poem about the sea."
    send_message(driver, question)
    wait_for("the reply to start", lambda: driver.execute_script(STATE)[0] is not None)
    wait_for("the reply to finish (Send enabled again)", lambda: (
        s := driver.execute_script(STATE))[2] and not s[1])
    reply, _, _, speed, errors = driver.execute_script(STATE)
    check(not errors, f"the page shows errors: {errors}")
    check(reply and reply.strip(), "the reply is empty")
    user = driver.find_elements("css selector", "#log .msg.user")
    check(len(user) == 1 and user[0].text == question, "the user's message is not shown")

    seen = driver.execute_script("return window.tkvSeen")
    streaming = sorted({n for n, stop_enabled in seen if stop_enabled and n > 0})
    print(f"reply ({len(reply)} chars) rendered at lengths {[n for n, _ in seen]}", flush=True)
    check(len(streaming) >= 2,
          f"the reply was not rendered as it streamed: lengths while Stop was enabled {streaming}")
    check(streaming[-1] <= len(reply), "the reply shrank after streaming")
    m = re.fullmatch(r"(\d+\.\d) tok/s", speed)
    check(m and float(m.group(1)) > 0, f"tok/s display shows {speed!r}")
    print(f"speed display: {speed}", flush=True)

    shot = os.path.join(outdir, "web_page_test.png")
    check(driver.save_screenshot(shot), "screenshot failed")
    print(f"screenshot: {shot}", flush=True)


def stop_long_reply(driver, srv):
    """Sends a long message, clicks Stop once text streams, and sees it stop."""
    def cancelled():
        return srv.metrics().get('turbokv:request_success_total{finished_reason="cancelled"}', 0)

    before_cancelled = cancelled()
    before_tokens = srv.metrics()["turbokv:generation_tokens_total"]
    set_value(driver, "maxtok", LONG_MAX_TOKENS)
    send_message(driver, "Tell me a long story about a lighthouse keeper and a storm.")
    wait_for("the long reply to stream", lambda: (
        s := driver.execute_script(STATE))[1] and s[0] and len(s[0]) > 0)
    driver.find_element("id", "stop").click()
    wait_for("Stop to end the reply (Send enabled, Stop disabled)", lambda: (
        s := driver.execute_script(STATE))[2] and not s[1])
    stopped_at = driver.execute_script(STATE)[0]
    wait_for("the server to count the request as cancelled",
             lambda: cancelled() > before_cancelled, interval=0.1)
    wait_for("no request running", lambda: srv.metrics()["turbokv:num_requests_running"] == 0,
             interval=0.1)
    generated = srv.metrics()["turbokv:generation_tokens_total"] - before_tokens
    time.sleep(0.5)
    reply, _, _, _, errors = driver.execute_script(STATE)
    check(not errors, f"the page shows errors after Stop: {errors}")
    check(reply == stopped_at, "the reply kept growing after Stop")
    check(generated < LONG_MAX_TOKENS,
          f"Stop did not cut the reply: {generated} tokens of {LONG_MAX_TOKENS} generated")
    print(f"stopped after {int(generated)} tokens ({len(reply)} chars shown)", flush=True)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, outdir = sys.argv[1], sys.argv[2]
    missing = missing_tools()
    if missing:
        # In CI (CI=true) a missing browser is a failure: scripts/install-deps installs
        # them, so the page must be tested there. Elsewhere the test is skipped.
        msg = "headless-Chromium test needs " + ", ".join(missing) + " (run scripts/install-deps)"
        if os.environ.get("CI") == "true":
            fail(msg)
        print("SKIP: " + msg, flush=True)
        sys.exit(SKIP)
    os.makedirs(outdir, exist_ok=True)

    srv = Server(binary, "--kv-quant", "turbo", "-c", "1024", "--parallel", "2")
    driver = None
    ok = False
    try:
        driver = start_browser()
        exchange(driver, srv, outdir)
        stop_long_reply(driver, srv)
        ok = True
    finally:
        if driver is not None:
            if not ok:
                shot = os.path.join(outdir, "web_page_test_failure.png")
                driver.save_screenshot(shot)
                print(f"screenshot at failure: {shot}", flush=True)
            driver.quit()
        rc = srv.terminate()
        if not ok:
            print(srv.output(), flush=True)
    check(rc == 0, f"server exit code {rc}: {srv.output()}")
    print("web page test: ok", flush=True)


if __name__ == "__main__":
    main()
