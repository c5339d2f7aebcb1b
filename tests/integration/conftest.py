"""Fixtures: `server` (a shared server, cleaned after each test) and `fresh_server` (a private
server per test, for restarts and crashes). Both have the q4m plugin installed and a `test` database.

Every server runs with the binary log on (the recommended configuration, q4m_server.binlog_args)
unless the test says otherwise: `server_factory.new(binlog=False)`, its own --skip-log-bin or
--log-bin, or `@both_binlog_modes` (binlog_modes.py), which runs the test once with each and
gives `server` and `fresh_server` the mode of the run (the `binlog` fixture: True or False).
"""
import os
import shutil
import tempfile
import time
from pathlib import Path

import pymysql
import pytest

from q4m_server import Server, ServerDied, make_pristine_datadir, snapshot_plugin

SYSTEM_DATABASES = {"information_schema", "mysql", "performance_schema", "sys", "test"}


@pytest.fixture(scope="session")
def tmp_root():
    root = Path(tempfile.mkdtemp(prefix="q4m-it-"))
    yield root
    if not os.environ.get("Q4M_KEEP_TMP"):
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pristine(tmp_root):
    d = tmp_root / "pristine"
    make_pristine_datadir(d)
    return d


@pytest.fixture(scope="session")
def plugin_dir(tmp_root):
    try:
        return snapshot_plugin(tmp_root / "plugin")
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


class _ServerFactory:
    def __init__(self, tmp_root, pristine, plugin_dir):
        self.tmp_root, self.pristine, self.plugin_dir, self.n = tmp_root, pristine, plugin_dir, 0
        self.servers = []  # every server made: none outlives the session (a test that forgot
        # its destroy() left mariadbd processes running after the run)

    def new(self, extra_args=(), install=True, at_startup=False, binlog=True):
        """A started server with the plugin: installed while it runs (INSTALL SONAME), or with
        at_startup loaded at startup (--plugin-load-add, as ./q4m.sh run does), which alone
        gives QUEUE two-phase commit when the binary log is off (docs/transactions.md).
        The binary log is on unless `binlog` is False or extra_args say how (q4m_server.Server)."""
        self.n += 1
        args = list(extra_args) + (["--plugin-load-add=ha_queue.so"] if at_startup else [])
        s = Server(self.tmp_root / f"s{self.n}", self.pristine, args, self.plugin_dir, binlog=binlog)
        self.servers.append(s)
        s.start()
        if install and not at_startup:
            s.install_plugin()
        return s


@pytest.fixture(scope="session")
def server_factory(tmp_root, pristine, plugin_dir):
    factory = _ServerFactory(tmp_root, pristine, plugin_dir)
    yield factory
    for s in factory.servers:
        s.kill9()


@pytest.fixture
def binlog(request):
    """The binary log mode of this test's servers: True (the default) or False, as
    @both_binlog_modes parametrizes it."""
    return getattr(request, "param", True)


@pytest.fixture(scope="session")
def _shared(server_factory):
    holder = {}  # binlog mode -> the shared server of that mode, made when first asked for
    yield holder
    for s in holder.values():
        s.destroy()


def _queue_variables(s):
    return dict(s.sql("SHOW GLOBAL VARIABLES LIKE 'queue\\_%'"))


def _sysvar_value(text):
    """SHOW VARIABLES text back to what SET takes: 16777216, 0.500000 or fdatasync."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _clean(s, saved_vars):
    """Puts the shared server back as it was; returns the XA transactions the test left prepared
    (rolled back here: DROP TABLE refuses to lose their QUEUE parts, and the tables would be left
    for every later test of the session to trip over)."""
    left = [r[3] for r in s.sql("XA RECOVER FORMAT='SQL'")]
    for xid in left:
        deadline = time.monotonic() + 30
        while True:
            try:
                s.sql(f"XA ROLLBACK {xid}")
                break
            except pymysql.err.OperationalError as e:  # XAER_NOTA: its session is still closing
                if e.args[0] != 1397 or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    for (db,) in s.sql("SHOW DATABASES"):
        if db not in SYSTEM_DATABASES:
            s.sql(f"DROP DATABASE `{db.replace('`', '``')}`")
    for (t,) in s.sql("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='test'"):
        s.sql(f"DROP TABLE IF EXISTS test.`{t.replace('`', '``')}`")
    for name, val in _queue_variables(s).items():
        if saved_vars.get(name, val) != val:
            old = saved_vars[name]
            s.sql(f"SET GLOBAL {name} = %s", (_sysvar_value(old),))
    return left


def _use_shared(holder, server_factory, binlog):
    """The shared server of one binary log mode (made when first asked for): the test's
    connections are closed and its tables dropped afterwards; the test fails if mariadbd died
    during it."""
    s = holder.get(binlog)
    if s is not None and not s.alive():  # an earlier test killed it; that test already failed
        s.destroy(keep_dir=True)
        s = None
    if s is None:
        s = holder[binlog] = server_factory.new(at_startup=True, binlog=binlog)
    saved_vars = _queue_variables(s)
    yield s
    try:
        s.check_alive("during the test")
        s._close_conns()
        left = _clean(s, saved_vars)
    except ServerDied as e:
        pytest.fail(str(e), pytrace=False)
    if left:
        pytest.fail(f"the test left XA transactions prepared (rolled back now): {left}", pytrace=False)


@pytest.fixture
def server(_shared, server_factory, binlog):
    """The shared server (one per binary log mode)."""
    yield from _use_shared(_shared, server_factory, binlog)


@pytest.fixture(params=[False, True], ids=["binlog_off", "binlog_on"])
def either_server(request, _shared, server_factory):
    """The shared server with the binary log off, then the one with it on (every autocommit
    change a two-phase statement transaction, as `./q4m.sh run` and replication run): the same
    test in both configurations. `.binlog` says which one it is."""
    gen = _use_shared(_shared, server_factory, request.param)
    s = next(gen)
    s.binlog = request.param
    yield s
    next(gen, None)


@pytest.fixture
def fresh_server(server_factory, binlog):
    """A private server for tests that restart or kill it."""
    s = server_factory.new(binlog=binlog)
    yield s
    s.destroy(keep_dir=bool(os.environ.get("Q4M_KEEP_TMP")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Appends the server error log tail to a failing test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name in ("server", "fresh_server"):
            s = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if isinstance(s, Server):
                report.sections.append((f"mariadbd error log ({name})", s.diagnostics()))
