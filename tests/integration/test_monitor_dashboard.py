"""q4m-monitor's dashboard in a real browser (Debian's headless Chromium, driven by Selenium),
against a server under load: the pages load, plots draw, actions move rows, and an account
that may only read sees no action and cannot act."""
import re
import time
import urllib.error
import urllib.parse
import urllib.request

import pymysql
import pytest
from selenium.webdriver.common.by import By

from monitor_harness import Load, Monitor, chromium, login, screenshot, submit
from sqlcheck import value

PASSWORD = "pw-dash"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    yield driver
    driver.quit()


@pytest.fixture
def monitor(server, tmp_path):
    m = Monitor(server, tmp_path)
    yield m
    m.stop()


@pytest.fixture
def load(server):
    lo = Load(server)
    yield lo
    lo.stop()


@pytest.fixture
def accounts(server):
    made = []

    def make(name, grants):
        server.sql(f"CREATE USER '{name}'@'localhost' IDENTIFIED BY '{PASSWORD}'")
        for g in grants:
            server.sql(f"GRANT {g} TO '{name}'@'localhost'")
        made.append(name)
        return name
    yield make
    for name in made:
        server.sql(f"DROP USER IF EXISTS '{name}'@'localhost'")


def _dead_jobs(server, n):
    server.sql("CREATE TABLE test.jobs (id INT, kind VARCHAR(10), body VARCHAR(40)) ENGINE=QUEUE MAX_DELIVERIES=1")
    server.sql("INSERT INTO test.jobs VALUES " + ", ".join(f"({i}, '{'mail' if i % 2 else 'sms'}', 'job {i}')"
                                                           for i in range(1, n + 1)))
    c = server.connect()
    for _ in range(n):
        assert value(c, "SELECT queue_wait('test.jobs', 0)") == 1
        assert value(c, "SELECT queue_abort()") == 1
    assert _dead(server) == n


def _dead(server, table="jobs"):
    return server.value("SELECT DEAD_ROWS FROM information_schema.QUEUE_TABLES "
                        f"WHERE TABLE_SCHEMA='test' AND TABLE_NAME='{table}'")


def _points(driver, chart_index, series):
    """Points of one series of the chart_index-th chart on the page."""
    charts = driver.find_elements(By.CSS_SELECTOR, "svg.chart")
    lines = charts[chart_index].find_elements(By.CSS_SELECTOR, f'polyline[data-series="{series}"]')
    return lines[0].get_attribute("points").split() if lines else []


def _wait(what, fn, timeout=30):
    deadline = time.monotonic() + timeout
    while not fn():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def _messages(driver):
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, "p.message")]


def test_pages_load_and_plots_draw_under_load(server, monitor, load, browser):
    server.sql("CREATE TABLE test.jobs (id INT, kind VARCHAR(10), body VARCHAR(40)) ENGINE=QUEUE")
    server.sql("INSERT INTO test.jobs VALUES " + ", ".join(f"({i}, '{'mail' if i % 2 else 'sms'}', 'job {i}')"
                                                           for i in range(1, 121)))
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('test.jobs', 0)") == 1
    owner_id = value(owner, "SELECT CONNECTION_ID()")
    login(browser, monitor, "root", "")
    # the overview: every queue, its depth, and its in/out plot once a few samples are in
    browser.get(monitor.url + "/")
    assert browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="test.jobs"]')

    def load_plot_drawn():
        browser.get(monitor.url + "/")
        row = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="test.traffic"]')
        lines = row.find_elements(By.CSS_SELECTOR, 'polyline[data-series="in"]')
        pts = lines[0].get_attribute("points").split() if lines else []
        return len(pts) >= 3 and any(float(p.split(",")[1]) < 88.0 for p in pts)  # above the 0 line (y=88)
    _wait("the load's in-rate plot", load_plot_drawn)
    cells = browser.find_element(By.CSS_SELECTOR, 'tr[data-queue="test.jobs"]').find_elements(By.TAG_NAME, "td")
    assert [c.text for c in cells[1:5]] == ["119", "1", "0", "0"]  # ready, owned, delayed, dead
    screenshot(browser, "overview")

    # a queue's page: depth and rate plots, options, the owned row with its connection
    submit(browser, browser.find_element(By.LINK_TEXT, "test.jobs"))
    assert browser.find_element(By.ID, "queue-name").text == "test.jobs"
    _wait("depth plot", lambda: browser.refresh() or len(_points(browser, 0, "ready")) >= 2)
    assert browser.find_element(By.ID, "stat-ready").text == "119"
    owned = browser.find_elements(By.CSS_SELECTOR, "#owned tbody tr")
    assert len(owned) == 1 and owned[0].find_elements(By.TAG_NAME, "td")[1].text == str(owner_id)
    assert "root@localhost" in owned[0].text and "no lease" in owned[0].text
    rows = browser.find_elements(By.CSS_SELECTOR, "#rows tbody tr")
    assert len(rows) == 50  # one page, not the whole queue
    screenshot(browser, "queue")

    # browsing: a filter, then the next page after the last row id shown
    box = browser.find_element(By.ID, "filter")
    box.clear()
    box.send_keys("kind = 'mail' AND id > 10")
    submit(browser, browser.find_element(By.ID, "apply-filter"))
    ids = [int(r.find_elements(By.TAG_NAME, "td")[2].text) for r in browser.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
    assert ids == list(range(11, 111, 2))  # 50 rows: the odd ids from 11
    submit(browser, browser.find_element(By.ID, "next-page"))
    ids = [int(r.find_elements(By.TAG_NAME, "td")[2].text) for r in browser.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
    assert ids == list(range(111, 121, 2))
    box = browser.find_element(By.ID, "filter")
    box.clear()
    box.send_keys("sleep(1) > 0")
    submit(browser, browser.find_element(By.ID, "apply-filter"))
    assert "'sleep' is not a column" in browser.find_element(By.ID, "browse-error").text


def test_redrive_and_purge_move_dead_rows(server, monitor, load, browser):
    _dead_jobs(server, 6)
    login(browser, monitor, "root", "")
    browser.get(monitor.url + "/queue/test/jobs")
    dead = browser.find_elements(By.CSS_SELECTOR, "#dead tbody tr")
    assert len(dead) == 6 and "job 1" in dead[0].text
    screenshot(browser, "dead-letters")
    form = browser.find_element(By.ID, "redrive-form")
    form.find_element(By.NAME, "max_rows").send_keys("4")
    submit(browser, browser.find_element(By.ID, "redrive"))
    assert "4 dead rows of test.jobs queued again" in _messages(browser)
    assert _dead(server) == 2
    c = server.connect()
    assert value(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == 1  # back in the queue, first redriven
    assert value(c, "SELECT queue_end()") == 1
    # purge needs its box ticked
    browser.find_element(By.ID, "purge-confirm").click()
    submit(browser, browser.find_element(By.ID, "purge"))
    assert "2 dead rows of test.jobs removed" in _messages(browser)
    assert _dead(server) == 0
    assert browser.find_element(By.ID, "stat-dead").text == "0"


def test_give_back_and_end_connection(server, monitor, load, browser):
    server.sql("CREATE TABLE test.jobs (id INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.jobs VALUES (1), (2)")
    hung, killed = server.connect(), server.connect()
    assert value(hung, "SELECT queue_wait('jobs', 0)") == 1
    assert value(killed, "SELECT queue_wait('jobs', 0)") == 1
    hung_row = value(hung, "SELECT queue_rowid()")
    killed_id = value(killed, "SELECT CONNECTION_ID()")
    login(browser, monitor, "root", "")
    browser.get(monitor.url + "/queue/test/jobs")
    submit(browser, browser.find_element(By.CSS_SELECTOR, f'tr[data-row="{hung_row}"] button.release'))
    assert any("given back to the queue" in m for m in _messages(browser)), _messages(browser)
    with pytest.raises(pymysql.err.OperationalError) as e:
        value(hung, "SELECT queue_end()")
    assert e.value.args[0] == 1205 and "was not removed" in e.value.args[1]
    rows = browser.find_elements(By.CSS_SELECTOR, "#owned tbody tr")
    assert len(rows) == 1
    submit(browser, rows[0].find_element(By.CSS_SELECTOR, "button.kill"))
    assert f"connection {killed_id} ended: its rows went back to the queue" in _messages(browser)
    _wait("the killed connection's row back", lambda: server.value(
        "SELECT OWNED_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'") == 0)
    with pytest.raises(pymysql.err.OperationalError):
        value(killed, "SELECT 1")


def test_a_read_only_account_sees_no_action_and_cannot_act(server, monitor, load, browser, accounts):
    _dead_jobs(server, 3)
    owner = server.connect()
    server.sql("INSERT INTO test.jobs VALUES (9, 'mail', 'owned')")
    assert value(owner, "SELECT queue_wait('jobs', 0)") == 1
    reader = accounts("dash_reader", ["SELECT ON test.*"])
    login(browser, monitor, reader, PASSWORD)
    browser.get(monitor.url + "/queue/test/jobs")
    assert browser.find_element(By.ID, "stat-dead").text == "3"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#dead tbody tr")) == 3  # may look
    for selector in ("#redrive", "#purge", "button.release", "button.kill"):
        assert browser.find_elements(By.CSS_SELECTOR, selector) == [], selector
    screenshot(browser, "read-only")

    # A forged form post with the session's own cookie and CSRF token: the server refuses it.
    csrf = browser.find_element(By.CSS_SELECTOR, "form.logout input[name=csrf]").get_attribute("value")
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in browser.get_cookies())
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None  # the browser shows the page (and its message) below
    opener = urllib.request.build_opener(NoRedirect)

    def post(path, fields):
        req = urllib.request.Request(monitor.url + path, data=urllib.parse.urlencode(fields).encode(),
                                     headers={"Cookie": cookie})
        try:
            with opener.open(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
    assert post("/queue/redrive?schema=test&table=jobs", {"csrf": csrf}) == 303  # back to the page, with the server's answer
    assert post("/queue/redrive?schema=test&table=jobs", {"csrf": "forged"}) == 403  # and no CSRF, no action
    assert post("/queue/redrive?schema=test&table=jobs", {}) == 403
    browser.get(monitor.url + "/queue/test/jobs")
    assert any(re.search(r"error 1142: .*command denied to user 'dash_reader'", m) for m in _messages(browser))
    assert _dead(server) == 3
    assert server.value("SELECT OWNED_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'") == 1

    # an account that may not read the table does not see it at all
    stranger = accounts("dash_stranger", ["SELECT ON mysql.db"])
    login(browser, monitor, stranger, PASSWORD)
    browser.get(monitor.url + "/")
    assert browser.find_elements(By.ID, "no-queues")
    browser.get(monitor.url + "/queue/test/jobs")
    assert "no QUEUE table test.jobs that this account may see" in browser.page_source


def test_login_is_required_and_a_wrong_password_is_refused(server, monitor, browser):
    browser.delete_all_cookies()
    browser.get(monitor.url + "/queue/test/jobs")
    assert browser.current_url.startswith(monitor.url + "/login")
    browser.find_element(By.ID, "user").send_keys("root")
    browser.find_element(By.ID, "password").send_keys("wrong")
    submit(browser, browser.find_element(By.ID, "login"))
    assert "cannot log in as 'root'" in browser.find_element(By.ID, "login-error").text
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(monitor.url + "/login", data=b"user=root&password="), timeout=10)
    assert e.value.code == 403  # a login post without the form's token
