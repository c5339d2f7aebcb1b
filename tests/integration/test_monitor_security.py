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
