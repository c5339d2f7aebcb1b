"""q4m-monitor's dashboard as an exposed web application: logins prove the account's password
(never the monitor process's OS identity), same-site redirects only, loopback unless told,
throttled logins, an audit trail, Secure cookies behind TLS, odd table names, a favicon. An
HTTP client (cookies kept, redirects not followed) against a real monitor and server."""
import os
import re
import time
import urllib.parse

import pytest

from monitor_harness import Client, Monitor

PASSWORD = "pw-sec"


@pytest.fixture
def monitors(tmp_path):
    started = []

    def start(server, *args, **kw):
        m = Monitor(server, tmp_path, *args, **kw)
        started.append(m)
        return m
    yield start
    for m in started:
        m.stop()


def _logged_in(client) -> bool:
    r = client.request("/")
    return r.status == 200 and 'id="whoami"' in r.text


# ---- 1. a login proves the password, never the monitor's OS identity --------------------------

@pytest.fixture
def debian_root(fresh_server):
    """fresh_server with root@localhost as Debian ships it (a password OR unix_socket), its
    socket reachable by other OS users (as /run/mysqld/mysqld.sock is)."""
    assert os.geteuid() == 0, "the monitor must run as OS user root to be let in by unix_socket"
    fresh_server.sql("ALTER USER root@localhost IDENTIFIED VIA mysql_native_password "
                     f"USING PASSWORD('{PASSWORD}') OR unix_socket")
    opened = []
    for d in (fresh_server.root.parent, fresh_server.root):
        opened.append((d, os.stat(d).st_mode & 0o777))
        os.chmod(d, 0o711)
    yield fresh_server
    for d, mode in opened:
        os.chmod(d, mode)


def test_a_wrong_password_is_refused_for_an_account_that_also_takes_unix_socket(debian_root, monitors):
    m = monitors(debian_root)  # polls as root through the socket: unix_socket lets it in
    assert "q4m_up 1.0" in m.get("/metrics")[0]
    for wrong in ("wrong", ""):
        c = Client(m)
        r = c.login("root", wrong)
        assert r.status == 401, (wrong, r.status, r.headers.get("Location"))
        assert "cannot log in as 'root'" in r.text and "Access denied" in r.text
        assert not _logged_in(c)
    c = Client(m)
    r = c.login("root", PASSWORD)
    assert r.status == 303, r.body
    assert _logged_in(c)


def test_an_account_that_also_takes_unix_socket_is_refused_when_the_password_cannot_be_checked(
        debian_root, monitors):
    os.chmod(debian_root.root, 0o700)  # the helper (OS user nobody) cannot reach the socket
    m = monitors(debian_root)
    r = Client(m).login("root", PASSWORD)
    assert r.status == 401
    assert "may also log in by unix_socket" in r.text and "nobody" in r.text


def test_an_account_with_a_password_only_logs_in_without_the_check(server, monitors):
    # ./q4m.sh run's server: root@localhost with an empty password, no unix_socket.
    m = monitors(server)
    c = Client(m)
    assert c.login("root", "").status == 303
    assert _logged_in(c)
    assert Client(m).login("root", "wrong").status == 401


# ---- 2. same-site redirects only ---------------------------------------------------------------

@pytest.mark.parametrize("target", ["/\\example.org/", "//example.org/", "/\t/example.org/", "https://example.org/",
                                    "/ /example.org", "\\\\example.org", "javascript:alert(1)", "/\x00x"])
def test_login_never_redirects_off_site(server, monitors, target):
    r = Client(monitors(server)).login("root", "", next_path=target)
    assert r.status == 303 and r.headers.get("Location") == "/", (target, r.headers.get("Location"))


def test_login_redirects_to_the_page_asked_for(server, monitors):
    c = Client(monitors(server))
    r = c.request("/queue?schema=test&table=jobs")
    assert r.status == 302
    next_path = urllib.parse.parse_qs(urllib.parse.urlsplit(r.headers["Location"]).query)["next"][0]
    assert next_path == "/queue?schema=test&table=jobs"
    assert c.login("root", "", next_path=next_path).headers.get("Location") == next_path


# ---- 3. loopback unless told; an empty password only from this machine -------------------------

def test_listening_beyond_loopback_needs_allow_remote(server, tmp_path):
    import subprocess
    from monitor_harness import MONITOR, free_port
    r = subprocess.run(["/usr/bin/python3", str(MONITOR), "--socket", str(server.socket),
                        "--listen", f"0.0.0.0:{free_port()}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--allow-remote" in r.stderr and "'user'@'localhost'" in r.stderr, r.stderr


def test_allow_remote_says_so_and_refuses_empty_passwords(server, monitors):
    server.sql(f"CREATE USER 'sec_op'@'localhost' IDENTIFIED BY '{PASSWORD}'")
    try:
        m = monitors(server, "--allow-remote", listen="0.0.0.0")
        assert "LISTENING BEYOND LOOPBACK" in m.log.read_text()
        r = Client(m).login("root", "")
        assert r.status == 401 and "an empty password is accepted only from a browser on this machine" in r.text
        c = Client(m)
        assert c.login("sec_op", PASSWORD).status == 303 and _logged_in(c)
    finally:
        server.sql("DROP USER 'sec_op'@'localhost'")


def test_an_empty_password_is_refused_through_a_proxy(server, monitors):
    m = monitors(server)
    r = Client(m).login("root", "", headers={"X-Forwarded-For": "203.0.113.9"})
    assert r.status == 401 and "empty password" in r.text
    r = Client(monitors(server, "--trusted-proxy", "127.0.0.1")).login("root", "")
    assert r.status == 401 and "empty password" in r.text


# ---- 4. throttled logins, an audit trail -------------------------------------------------------

def _connections(server):
    return {k: int(v) for k, v in server.sql("SHOW GLOBAL STATUS WHERE Variable_name IN "
                                             "('Connections', 'Aborted_connects')")}


def test_failed_logins_are_throttled_per_address_and_per_account_without_connecting(server, monitors):
    server.sql(f"CREATE USER 'sec_a'@'localhost' IDENTIFIED BY '{PASSWORD}'")
    server.sql(f"CREATE USER 'sec_b'@'localhost' IDENTIFIED BY '{PASSWORD}'")
    try:
        # the proxy's X-Forwarded-For stands for browsers at two addresses
        m = monitors(server, "--login-attempts", "3", "--login-backoff", "600", "--trusted-proxy", "127.0.0.1")
        at = lambda addr: {"X-Forwarded-For": addr}  # noqa: E731
        for _ in range(3):
            assert Client(m).login("sec_a", "wrong", headers=at("198.51.100.1")).status == 401
        before = _connections(server)
        for user, addr in (("sec_a", "198.51.100.1"),   # the 4th attempt, with the right password
                           ("sec_a", "198.51.100.2"),   # the account, from elsewhere
                           ("sec_b", "198.51.100.1")):  # the address, for another account
            r = Client(m).login(user, PASSWORD, headers=at(addr))
            assert r.status == 429, (user, addr, r.status)
            assert "too many failed logins" in r.text and int(r.headers["Retry-After"]) > 500
        assert _connections(server) == before  # refused without a connection to MariaDB
        c = Client(m)
        assert c.login("sec_b", PASSWORD, headers=at("198.51.100.2")).status == 303
        assert "action=login outcome='throttled'" in m.log.read_text()
    finally:
        server.sql("DROP USER 'sec_a'@'localhost'")
        server.sql("DROP USER 'sec_b'@'localhost'")


def _csrf(client, path):
    return re.search(r'name="csrf" value="([^"]+)"', client.request(path).body).group(1)


def _audit(m):
    return [line for line in m.log.read_text().splitlines() if " audit: " in line]


def test_every_action_is_in_the_audit_trail(server, monitors):
    from sqlcheck import value
    server.sql("CREATE TABLE test.jobs (id INT) ENGINE=QUEUE MAX_DELIVERIES=1")
    server.sql("INSERT INTO test.jobs VALUES (1), (2), (3), (4), (5)")
    c1 = server.connect()
    for _ in range(3):
        assert value(c1, "SELECT queue_wait('test.jobs', 0)") == 1
        assert value(c1, "SELECT queue_abort()") == 1  # 3 dead rows
    hung, killed = server.connect(), server.connect()
    assert value(hung, "SELECT queue_wait('test.jobs', 0)") == 1
    assert value(killed, "SELECT queue_wait('test.jobs', 0)") == 1
    hung_row, killed_id = value(hung, "SELECT queue_rowid()"), value(killed, "SELECT CONNECTION_ID()")
    m = monitors(server)
    c = Client(m)
    assert c.login("root", "").status == 303
    q = "schema=test&table=jobs"
    csrf = _csrf(c, f"/queue?{q}")
    for path, fields in ((f"/queue/redrive?{q}", {"max_rows": "1"}),
                         (f"/queue/purge?{q}", {"confirm": "yes"}),
                         (f"/queue/release?{q}", {"row_id": str(hung_row)}),
                         (f"/queue/kill?{q}", {"connection_id": str(killed_id)})):
        assert c.request(path, {"csrf": csrf, **fields}).status == 303, path
    assert c.request("/logout", {"csrf": csrf}).status == 303
    lines = _audit(m)
    expected = [r"user='root' client=127\.0\.0\.1 action=login outcome='ok'",
                r"action=redrive schema='test' table='jobs' max_rows='1' "
                r"outcome='1 dead rows of test.jobs queued again'",
                r"action=purge schema='test' table='jobs' max_rows='all' "
                r"outcome='2 dead rows of test.jobs removed'",
                rf"action=give_back schema='test' table='jobs' row_id='{hung_row}' outcome=.row {hung_row}: 1 rows given",
                rf"action=end_connection schema='test' table='jobs' connection_id='{killed_id}' outcome='connection",
                r"user='root' client=127\.0\.0\.1 action=logout outcome='ok'"]
    assert len(lines) == len(expected), lines
    for line, pattern in zip(lines, expected):
        assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ q4m-monitor INFO audit: " + ".*" + pattern, line), \
            (pattern, line)
    assert all("user='root' client=127.0.0.1" in line for line in lines)


# ---- 5. Secure cookies behind TLS --------------------------------------------------------------

def _set_cookies(reply):
    return {c.split("=", 1)[0]: c for c in reply.headers.get_all("Set-Cookie") or []}


def test_cookies_are_secure_when_the_trusted_proxy_says_tls(server, monitors):
    m = monitors(server, "--trusted-proxy", "127.0.0.1")
    assert "; Secure" in _set_cookies(Client(m).request("/login", headers={"X-Forwarded-Proto": "https"}))["q4m_login"]
    assert "Secure" not in _set_cookies(Client(m).request("/login", headers={"X-Forwarded-Proto": "http"}))["q4m_login"]
    assert "Secure" not in _set_cookies(Client(m).request("/login"))["q4m_login"]


def test_session_cookie_secure_after_a_login_over_tls(server, monitors):
    server.sql(f"CREATE USER 'sec_tls'@'localhost' IDENTIFIED BY '{PASSWORD}'")
    try:
        m = monitors(server, "--trusted-proxy", "127.0.0.1")
        tls = {"X-Forwarded-Proto": "https"}
        form = Client(m).request("/login", headers=tls)
        token = _set_cookies(form)["q4m_login"].split(";")[0].split("=", 1)[1]
        r = Client(m).request("/login", {"csrf": token, "user": "sec_tls", "password": PASSWORD},
                              headers={**tls, "Cookie": f"q4m_login={token}"})
        assert r.status == 303 and "; Secure" in _set_cookies(r)["q4m_session"]
        # without the trusted proxy, the same header is not believed
        m2 = monitors(server)
        assert "Secure" not in _set_cookies(Client(m2).request("/login", headers=tls))["q4m_login"]
        r = Client(m2).login("sec_tls", PASSWORD)
        assert r.status == 303 and "Secure" not in _set_cookies(r)["q4m_session"]
    finally:
        server.sql("DROP USER 'sec_tls'@'localhost'")


def test_secure_cookies_flag(server, monitors):
    m = monitors(server, "--secure-cookies")
    form = Client(m).request("/login")
    token = _set_cookies(form)["q4m_login"].split(";")[0].split("=", 1)[1]
    assert "; Secure" in _set_cookies(form)["q4m_login"]
    r = Client(m).request("/login", {"csrf": token, "user": "root", "password": ""},
                          headers={"Cookie": f"q4m_login={token}"})
    assert r.status == 303 and "; Secure" in _set_cookies(r)["q4m_session"]


# ---- 7. a favicon ------------------------------------------------------------------------------

def test_favicon_is_not_a_404(server, monitors):
    m = monitors(server)
    c = Client(m)
    r = c.request("/favicon.ico")
    assert r.status in (200, 204, 301, 302, 308), r.status
    if r.status in (301, 302, 308):
        r = c.request(r.headers["Location"])
        assert r.status == 200 and r.headers["Content-Type"].startswith("image/svg+xml")
    assert 'rel="icon"' in c.request("/login").body


# ---- 6. odd table names ------------------------------------------------------------------------

ODD_NAMES = [("test", "t:x"), ("test", "."), ("test", ".."), ("test", "a`b"), ("test", "sp ace"),
             ("test", "naïve·日本"), ("test", "a/b"), ("test", "x.y"), ("odd.db", "q:1")]


def _quoted(name):
    return "`" + name.replace("`", "``") + "`"


def test_odd_table_names_in_metrics_and_pages_in_one_statement_a_poll(fresh_server, monitors):
    from prometheus_client.parser import text_string_to_metric_families
    s = fresh_server
    s.sql("CREATE DATABASE `odd.db`")
    for i, (schema, table) in enumerate(ODD_NAMES):
        s.sql(f"CREATE TABLE {_quoted(schema)}.{_quoted(table)} (v INT) ENGINE=QUEUE")
        s.sql(f"INSERT INTO {_quoted(schema)}.{_quoted(table)} VALUES " + ", ".join(["(1)"] * (i + 1)))
    s.sql("SET GLOBAL log_output = 'TABLE'")
    s.sql("SET GLOBAL general_log = 1")
    m = monitors(s)

    def ready():
        text = m.get("/metrics")[0]
        return {(x.labels["schema"], x.labels["table"]): x.value for f in text_string_to_metric_families(text)
                for x in f.samples if x.name == "q4m_queue_rows" and x.labels.get("state") == "ready"}
    deadline = time.monotonic() + 30
    while len(ready()) < len(ODD_NAMES) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ready() == {key: float(i + 1) for i, key in enumerate(ODD_NAMES)}

    # every poll asked all tables in its one statement: none one by one, no table skipped
    s.sql("SET GLOBAL general_log = 0")
    stats = [q for (q,) in s.sql("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log "
                                 "WHERE command_type = 'Query' AND argument LIKE '%queue\\_stats(%'")]
    assert stats and all("FROM information_schema.QUEUE_TABLES" in q and "TABLE_SCHEMA = " not in q
                         for q in stats), stats
    assert "skipped" not in m.log.read_text()

    c = Client(m)
    assert c.login("root", "").status == 303
    overview = c.request("/")
    for i, (schema, table) in enumerate(ODD_NAMES):
        path = "/queue?" + urllib.parse.urlencode({"schema": schema, "table": table})
        assert path.replace("&", "&amp;") in overview.body, (schema, table)  # the overview links the page
        page = c.request(path)
        assert page.status == 200, (schema, table, page.status, page.text[-500:])
        assert f'id="stat-ready">{i + 1}<' in page.body, (schema, table)
        assert page.text.count(f"{schema}.{table}") >= 1
        # an action names the table to the engine whole too
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.body).group(1)
        assert c.request("/queue/redrive?" + urllib.parse.urlencode({"schema": schema, "table": table}),
                         {"csrf": csrf}).status == 303
        assert f"0 dead rows of {schema}.{table} queued again" in c.request(path).text, (schema, table)
