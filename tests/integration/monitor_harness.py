"""What the q4m-monitor tests share: the monitor process next to a test server, headless
Chromium (Debian's chromium and chromium-driver, driven by Selenium), a login, and a load of
producers and consumers on the server while the pages are looked at."""
import html
import http.cookiejar
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pymysql

from q4m_server import REPO

MONITOR = REPO / "tools" / "monitor" / "q4m-monitor"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Where the tests save their screenshots: Q4M_MONITOR_SCREENSHOTS=docs/images (scripts/monitor-screenshots.sh)
SCREENSHOTS = os.environ.get("Q4M_MONITOR_SCREENSHOTS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Monitor:
    """tools/monitor/q4m-monitor polling `server` through its socket as root."""

    def __init__(self, server, tmp: Path, *args, listen="127.0.0.1"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"monitor-{self.port}.log"
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", str(MONITOR), "--socket", str(server.socket), "--listen", f"{listen}:{self.port}",
             "--interval", "0.5", *args],
            stdin=subprocess.DEVNULL, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.get("/metrics")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("q4m-monitor did not start:\n" + self.log.read_text())
                time.sleep(0.1)

    def get(self, path, headers=None) -> tuple[str, str]:
        """(body, content type) of a GET."""
        req = urllib.request.Request(self.url + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode(), r.headers.get("Content-Type")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Reply:
    status: int
    headers: object  # email.message.Message: get(), get_all()
    body: str

    @property
    def text(self) -> str:
        """The body with HTML entities decoded (&#39; -> ')."""
        return html.unescape(self.body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


class Client:
    """An HTTP client for the dashboard as a browser uses it (cookies kept), redirects not
    followed: each reply is what the monitor answered."""

    def __init__(self, monitor: Monitor):
        self.monitor = monitor
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies), _NoRedirect)

    def request(self, path, fields=None, headers=None) -> Reply:
        data = urllib.parse.urlencode(fields).encode() if fields is not None else None
        req = urllib.request.Request(self.monitor.url + path, data=data, headers=headers or {})
        try:
            with self.opener.open(req, timeout=30) as r:
                return Reply(r.status, r.headers, r.read().decode())
        except urllib.error.HTTPError as e:
            return Reply(e.code, e.headers, e.read().decode())

    def cookie(self, name) -> str | None:
        return next((c.value for c in self.cookies if c.name == name), None)

    def login(self, user, password, next_path=None, headers=None) -> Reply:
        """The login form: fetched (its token cookie), then posted."""
        path = "/login" + (f"?{urllib.parse.urlencode({'next': next_path})}" if next_path is not None else "")
        form = self.request(path, headers=headers)
        assert form.status == 200, form
        return self.request(path, {"csrf": self.cookie("q4m_login"), "user": user, "password": password},
                            headers=headers)


def chromium(tmp: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1280,1000", f"--user-data-dir={tmp / 'chromium-profile'}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    return driver


def submit(driver, button):
    """Clicks a form's button and waits for the page it leads to (click() does not)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # ChromeDriver sometimes answers a call on an element of a page that has just been left with
    # "unhandled inspector error: ... Node with given id does not belong to the document" instead
    # of a stale element (seen twice in ~40 CI runs, on a click and on the staleness check):
    # for this page, both mean it moved on.
    def gone(e):
        return isinstance(e, StaleElementReferenceException) or "unhandled inspector error" in str(e)

    page = driver.find_element(By.TAG_NAME, "html")

    def moved_on(_):
        try:
            page.is_enabled()
            return False
        except WebDriverException as e:
            if gone(e):
                return True
            raise

    try:
        button.click()
    except WebDriverException as e:
        if not gone(e):
            raise
        time.sleep(1)
        if not moved_on(driver):
            driver.execute_script("arguments[0].click()", button)
    WebDriverWait(driver, 30).until(moved_on)


def login(driver, monitor: Monitor, user: str, password: str):
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(monitor.url + "/login")
    driver.find_element(By.ID, "user").send_keys(user)
    driver.find_element(By.ID, "password").send_keys(password)
    submit(driver, driver.find_element(By.ID, "login"))
    assert driver.find_element(By.ID, "whoami").text == user


def screenshot(driver, name: str):
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))


class Load:
    """Producers and consumers on test.traffic until stopped (bounded: at most `seconds`)."""

    def __init__(self, server, seconds=120.0):
        server.sql("CREATE TABLE IF NOT EXISTS test.traffic (id INT, body VARCHAR(40)) ENGINE=QUEUE")
        self._stop = threading.Event()
        self.errors = []
        self.produced = self.consumed = 0
        self._deadline = time.monotonic() + seconds
        self._threads = [threading.Thread(target=self._produce, args=(server,), daemon=True),
                         threading.Thread(target=self._consume, args=(server,), daemon=True)]
        for t in self._threads:
            t.start()

    def _conn(self, server):
        return pymysql.connect(unix_socket=str(server.socket), user="root", password="", database="test",
                               autocommit=True)

    def _running(self):
        return not self._stop.is_set() and time.monotonic() < self._deadline

    def _produce(self, server):
        try:
            with self._conn(server) as c, c.cursor() as cur:
                i = 0
                while self._running():
                    cur.execute("INSERT INTO traffic VALUES " + ", ".join(f"({i + k}, 'msg')" for k in range(5)))
                    i += 5
                    self.produced += 5
                    time.sleep(0.01)
        except Exception as e:  # noqa: BLE001 (reported by stop())
            self.errors.append(e)

    def _consume(self, server):
        try:
            with self._conn(server) as c, c.cursor() as cur:
                while self._running():
                    cur.execute("SELECT id FROM traffic WHERE queue_wait('traffic', 0.2)")
                    self.consumed += len(cur.fetchall())
        except Exception as e:  # noqa: BLE001
            self.errors.append(e)

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        assert not self.errors, self.errors
        assert self.produced > 0 and self.consumed > 0, (self.produced, self.consumed)
