"""The Debian package mariadb-plugin-q4m (`make deb`), installed for real into Debian's own
mariadb service (/var/lib/mysql, /run/mysqld), started as Debian starts it (`service mariadb`,
its init script; maintainer scripts and mariadb-server's trigger use invoke-rc.d).

install -> queue works (XA too) -> upgrade to a newer build with rows queued and one owned by
an open connection (server restarted, nothing lost, the owned row back in the queue) -> remove
(server restarted without the engine, tables on disk) -> reinstall (they open, rows there) ->
purge (conf snippet gone). The machine is put back as it was: the package purged, the test's
database dropped, the service stopped unless it was running before, policy-rc.d restored.

Needs root (it installs a package). Skipped when not root or when Debian's mariadb service
cannot be started here. In containers whose /usr/sbin/policy-rc.d forbids starting services
(Docker's exits 101), the test replaces it while it runs with one that allows the mariadb
service only (everything else is still asked of the original), as on a normal Debian machine.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pymysql
import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = "mariadb-plugin-q4m"
SOCK = "/run/mysqld/mysqld.sock"
PIDFILE = Path("/run/mysqld/mysqld.pid")
CONF = Path("/etc/mysql/mariadb.conf.d/50-q4m.cnf")
PLUGIN = Path("/usr/lib/mysql/plugin/ha_queue.so")
DATADIR = Path("/var/lib/mysql")
POLICY = Path("/usr/sbin/policy-rc.d")
POLICY_SAVED = Path("/usr/sbin/policy-rc.d.q4m-test-orig")
# Debian's server listens on 127.0.0.1:3306; other tests' throwaway servers take free TCP ports
# on this machine, so while the test runs the service listens on its socket only.
SOCKET_ONLY = Path("/etc/mysql/mariadb.conf.d/99-q4m-pkgtest.cnf")
DB = "q4m_pkgtest"
MARK = "+pkgtest"          # version suffix of the test's builds: a leftover is recognisable
APT = ["apt-get", "-y", "-q", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=60"]
# Run from `make test`: the nested `make deb` must not inherit its jobserver or flags.
ENV = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
ENV["DEBIAN_FRONTEND"] = "noninteractive"


def run(cmd, timeout=120, check=True):
    """Runs cmd to its end: a Ctrl-C or SIGTERM meanwhile is raised only after it (killing
    apt or dpkg halfway would leave the package half-installed for the cleanup)."""
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        end = time.monotonic() + timeout
        interrupted = None
        while True:
            try:
                rc = proc.wait(timeout=max(0.1, end - time.monotonic()))
                break
            except KeyboardInterrupt as e:
                interrupted = e
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise AssertionError(f"{' '.join(map(str, cmd))} took over {timeout} s")
        out.seek(0)
        text = out.read()
    if interrupted:
        raise interrupted
    if check and rc != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {rc}:\n{text[-4000:]}")
    return subprocess.CompletedProcess(cmd, rc, text)


def installed_version():
    r = run(["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Version}", PKG], check=False)
    if r.returncode != 0:
        return None
    status, _, version = r.stdout.partition(" ")
    return version.strip() if status.startswith("ii") else ("config-files" if status.startswith("rc") else None)


def server_pid():
    try:
        pid = int(PIDFILE.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def service_running():
    return run(["service", "mariadb", "status"], timeout=30, check=False).returncode == 0


def connect(db=None, deadline=60):
    """Root over the socket (unix_socket authentication), waiting for the server to answer."""
    end = time.monotonic() + deadline
    while True:
        try:
            return pymysql.connect(unix_socket=SOCK, user="root", database=db, autocommit=True,
                                   connect_timeout=5, read_timeout=60, write_timeout=60)
        except pymysql.err.OperationalError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def query(sql, db=DB, deadline=60):
    conn = connect(db, deadline)
    try:
        with conn.cursor() as c:
            c.execute(sql)
            return c.fetchall()
    finally:
        conn.close()


def take_and_end():
    """queue_wait + queue_end on one connection (ownership is the connection's): the id taken."""
    conn = connect(DB)
    try:
        with conn.cursor() as c:
            c.execute("SELECT id FROM q WHERE queue_wait('q', 0)")
            taken = c.fetchall()
            c.execute("SELECT queue_end()")
            assert c.fetchall() == ((1,),)
        return taken[0][0] if taken else None
    finally:
        conn.close()


def ids(db=DB):
    return [r[0] for r in query("SELECT id FROM q ORDER BY id", db)]


def build_deb(tmp, suffix):
    out = tmp / suffix.strip("+")
    r = run(["make", "--no-print-directory", "deb", f"DEB_DIR={out}", f"DEB_VERSION_SUFFIX={suffix}"],
            timeout=300)
    debs = sorted(out.glob(f"{PKG}_*.deb"))
    assert len(debs) == 1, r.stdout
    return debs[0]


def apt_install(deb):
    # A path (not a name) makes apt install the file instead of looking the name up.
    return run(APT + ["install", str(deb)], timeout=150)


def allow_mariadb_in_policy():
    """Replaces a policy-rc.d that forbids services with one that allows mariadb only."""
    if not POLICY.exists():
        return
    if not POLICY_SAVED.exists():
        shutil.copy2(POLICY, POLICY_SAVED)
    tmp = POLICY.with_name("policy-rc.d.q4m-test-new")
    tmp.write_text("#!/bin/sh\n# written by q4m's test_debian_package.py while it runs; the original\n"
                   f"# is {POLICY_SAVED} and comes back when the test ends\n"
                   '[ "$1" = --quiet ] && shift\n[ "$1" = mariadb ] && exit 0\n'
                   f'exec {POLICY_SAVED} "$@"\n')
    tmp.chmod(0o755)
    tmp.replace(POLICY)


def restore_policy():
    if POLICY_SAVED.exists():
        POLICY_SAVED.replace(POLICY)


def drop_test_database():
    """Drops the test's database: with the engine if it is loaded, else by hand, server stopped."""
    if not (DATADIR / DB).exists():
        return
    try:
        query(f"DROP DATABASE IF EXISTS {DB}", db=None, deadline=5)
    except pymysql.err.MySQLError:
        pass
    if (DATADIR / DB).exists():
        run(["service", "mariadb", "stop"], timeout=120, check=False)
        shutil.rmtree(DATADIR / DB, ignore_errors=True)


def _stop_like_ctrl_c(sig, frame):
    # SIGTERM/SIGHUP (e.g. the suite's timeout) end the test as Ctrl-C does, so the fixture's
    # cleanup still restores policy-rc.d and purges the package. An interrupted run's leftovers
    # (the saved policy, a "+pkgtest" package) are also cleaned up by the next run.
    for s in (signal.SIGTERM, signal.SIGHUP):  # a second one must not cut the cleanup short
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {sig}")


@pytest.fixture
def machine(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("installs a Debian package into the system: needs root")
    if not Path("/etc/init.d/mariadb").exists() or shutil.which("service") is None:
        pytest.skip("Debian's mariadb service (/etc/init.d/mariadb, service) is not installed")
    version = installed_version()
    if version and MARK not in version:
        pytest.skip(f"{PKG} {version} is installed (not by this test): the test would replace it")
    was_running = service_running()
    had_user = run(["getent", "passwd", "q4m"], check=False).returncode == 0
    old_handlers = {sig: signal.signal(sig, _stop_like_ctrl_c) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if version:  # a leftover of an interrupted run of this test
            run(["dpkg", "--purge", PKG], timeout=120)
        allow_mariadb_in_policy()
        SOCKET_ONLY.write_text("# written by q4m's test_debian_package.py while it runs\n"
                               "[mariadb]\nskip-networking\n")
        r = run(["service", "mariadb", "restart"], timeout=120, check=False)
        if r.returncode != 0 or server_pid() is None:
            pytest.skip(f"Debian's mariadb service cannot be started here: {r.stdout[-1000:]}")
        connect(deadline=30).close()
        yield tmp_path
    finally:
        drop_test_database()
        if installed_version():
            run(["dpkg", "--purge", PKG], timeout=120, check=False)
        SOCKET_ONLY.unlink(missing_ok=True)
        if was_running:  # as before: with its own configuration
            run(["service", "mariadb", "restart"], timeout=120, check=False)
        else:
            run(["service", "mariadb", "stop"], timeout=120, check=False)
        restore_policy()
        if not had_user:  # postinst's system user: Debian keeps users on purge, the test does not
            run(["deluser", "--system", "q4m"], check=False)
            run(["delgroup", "--system", "q4m"], check=False)
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)


def test_install_upgrade_remove_reinstall_purge(machine):
    tmp = machine
    deb1 = build_deb(tmp, MARK + "1")
    deb2 = build_deb(tmp, MARK + "2")
    v1, v2 = (d.name.split("_")[1] for d in (deb1, deb2))
    server = run(["dpkg-query", "-W", "-f=${Version}", "mariadb-server-core"]).stdout
    control = run(["dpkg-deb", "-f", str(deb1), "Depends"]).stdout
    assert f"mariadb-server (= {server})" in control
    if shutil.which("lintian"):  # not a dependency of the tree; docs/build.md explains the overrides
        tags = run(["lintian", "-I", "--pedantic", str(deb1)], check=False).stdout
        # A suffixed version ("-1+pkgtest1") is no initial upload: that override goes unused.
        assert not [t for t in tags.splitlines() if t[:2] in ("E:", "W:", "I:", "P:")
                    and "unused-override initial-upload-closes-no-bugs" not in t], tags

    # --- install: a running server is restarted with the engine loaded at startup
    pid = server_pid()
    apt_install(deb1)
    assert installed_version() == v1
    assert server_pid() not in (None, pid), "install did not restart the running server"
    assert CONF.exists() and "plugin-load-add = ha_queue.so" in CONF.read_text()
    assert PLUGIN.exists()
    for tool in ("q4m-backup", "q4m-bench", "q4m-forward", "q4m-monitor"):
        assert shutil.which(tool) == f"/usr/bin/{tool}", tool
    assert "Moves rows" in run(["q4m-forward", "--help"], check=False).stdout
    assert run(["q4m-monitor", "--help"], check=False).returncode == 0
    for unit in ("q4m-monitor.service", "q4m-forward@.service"):
        assert Path("/lib/systemd/system", unit).exists()
        assert not list(Path("/etc/systemd/system").glob(f"*.wants/{unit}")), f"{unit} enabled"
    assert query("SELECT @@skip_networking", db=None) == ((1,),)  # no TCP port taken from others
    engine = query("SELECT SUPPORT, TRANSACTIONS, XA FROM information_schema.ENGINES "
                   "WHERE ENGINE = 'QUEUE'", db=None)
    assert engine == (("YES", "YES", "YES"),), engine  # loaded at startup: two-phase commit

    query(f"CREATE DATABASE {DB}", db=None)
    query("CREATE TABLE q (id INT, v TEXT) ENGINE=QUEUE")
    query("INSERT INTO q VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e')")
    assert take_and_end() == 1
    assert ids() == [2, 3, 4, 5]
    # XA across InnoDB and QUEUE works in the first server the package started.
    query("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
    conn = connect(DB)
    with conn.cursor() as c:
        for stmt in ("XA START 'x1'", "INSERT INTO t VALUES (1)", "INSERT INTO q VALUES (6,'f')",
                     "XA END 'x1'", "XA PREPARE 'x1'", "XA COMMIT 'x1'"):
            c.execute(stmt)
    conn.close()
    assert ids() == [2, 3, 4, 5, 6]

    # --- upgrade with rows queued and row 2 owned by an open connection
    owner = connect(DB)
    with owner.cursor() as c:
        c.execute("SELECT id FROM q WHERE queue_wait('q', 0)")
        assert c.fetchall() == ((2,),)
    pid = server_pid()
    apt_install(deb2)
    assert installed_version() == v2
    assert server_pid() not in (None, pid), "the upgrade did not restart the server"
    with pytest.raises(pymysql.err.OperationalError):
        with owner.cursor() as c:  # its server is gone: it owns nothing any more
            c.execute("SELECT queue_end()")
    owner.close()
    assert ids() == [2, 3, 4, 5, 6]  # nothing lost
    assert take_and_end() == 2  # row 2 is free again
    assert ids() == [3, 4, 5, 6]

    # --- remove: the server restarts without the engine; the tables stay on disk
    pid = server_pid()
    run(APT + ["remove", PKG], timeout=150)
    assert installed_version() == "config-files"
    assert not PLUGIN.exists()
    assert CONF.exists()  # a conffile: kept until purge
    assert (DATADIR / DB / "q.frm").exists()
    assert server_pid() not in (None, pid), "removal did not restart the server"
    with pytest.raises(pymysql.err.MySQLError) as err:
        ids()
    assert err.value.args == (1286, "Unknown storage engine 'QUEUE'"), err.value
    # ... and it starts again from cold (the snippet names a plugin that is gone: logged, ignored).
    run(["service", "mariadb", "restart"], timeout=120)
    assert query("SELECT COUNT(*) FROM t") == ((1,),)

    # --- reinstall: the tables open, with their rows
    apt_install(deb2)
    assert installed_version() == v2
    assert ids() == [3, 4, 5, 6]
    assert take_and_end() == 3

    # --- purge: the conf snippet goes (the test's tables first, to leave the datadir clean)
    query(f"DROP DATABASE {DB}", db=None)
    run(APT + ["purge", PKG], timeout=150)
    assert installed_version() is None
    assert not CONF.exists()
    assert query("SELECT 1", db=None) == ((1,),)
    assert not query("SELECT 1 FROM information_schema.ENGINES WHERE ENGINE = 'QUEUE'", db=None)
