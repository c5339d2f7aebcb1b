"""A throwaway mariadbd with the q4m plugin, for integration tests (Test::mysqld style).

One pristine datadir is made per test session (mariadb-install-db is the slow part);
each Server copies it, so every server starts from the same clean state.
Servers listen only on their own unix socket (--skip-networking).
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pymysql

REPO = Path(__file__).resolve().parents[2]
# Q4M_SERVER_ROOT: test a server unpacked elsewhere (`dpkg-deb -x` of another version's debs,
# docs/build.md "Testing against another server version") instead of the installed one; its
# client tools (mariadb, mariadb-dump, mariadb-backup, ...) then come first on every test's PATH.
SERVER_ROOT = Path(os.environ["Q4M_SERVER_ROOT"]) if os.environ.get("Q4M_SERVER_ROOT") else None
# Q4M_PLUGIN_DIR: the plugin built for that server (`make MARIADB_VERSION=... BUILD=... plugin`).
PLUGIN_DIR = Path(os.environ.get("Q4M_PLUGIN_DIR") or REPO / "build" / "plugin")
PLUGIN_SO = PLUGIN_DIR / "ha_queue.so"
# The server package's own plugins (file_key_management.so, ...).
SERVER_PLUGIN_DIR = (SERVER_ROOT or Path("/")) / "usr/lib/mysql/plugin"
# mariadbd and mariadb-install-db look for their share files (errmsg.sys, the system tables'
# SQL) under the compiled-in /usr unless told where they are.
SERVER_ROOT_ARGS = ([f"--basedir={SERVER_ROOT}/usr", f"--lc-messages-dir={SERVER_ROOT}/usr/share/mysql"]
                    if SERVER_ROOT else [])
if SERVER_ROOT:
    os.environ["PATH"] = f"{SERVER_ROOT}/usr/bin:{SERVER_ROOT}/usr/sbin:{os.environ.get('PATH', '')}"
    lib = f"{SERVER_ROOT}/usr/lib/x86_64-linux-gnu"
    os.environ["LD_LIBRARY_PATH"] = f"{lib}:{os.environ['LD_LIBRARY_PATH']}" if os.environ.get("LD_LIBRARY_PATH") else lib
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 60
# A hung engine must fail a test, not hang the suite: every client read has a deadline.
READ_TIMEOUT_S = 180


def _tool(name):
    if SERVER_ROOT:
        # Never a tool of the installed server: that would test a mix of two versions.
        for d in ("usr/sbin", "usr/bin"):
            if (SERVER_ROOT / d / name).exists():
                return str(SERVER_ROOT / d / name)
        raise RuntimeError(f"{name} not found in Q4M_SERVER_ROOT={SERVER_ROOT}")
    path = shutil.which(name)
    for d in ("/usr/sbin", "/usr/bin"):
        if path is None and os.path.exists(os.path.join(d, name)):
            path = os.path.join(d, name)
    if path is None:
        raise RuntimeError(f"{name} not found; run scripts/setup-deps.sh")
    return path


# Small InnoDB files make the pristine datadir cheap to copy and servers quick to start/stop
# (the tests store almost nothing in InnoDB).
INNODB_ARGS = ["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M"]
SERVER_ONLY_ARGS = ["--innodb-temp-data-file-path=ibtmp1:4M:autoextend",
                    "--innodb-buffer-pool-dump-at-shutdown=0", "--innodb-buffer-pool-load-at-startup=0"]
# Q4M_EXTRA_SERVER_ARGS: more options for every server (e.g. "--sync-binlog=0" to run a suite
# with MariaDB's default, where the binary log is not a durability point and QUEUE syncs itself).
SERVER_ONLY_ARGS += os.environ.get("Q4M_EXTRA_SERVER_ARGS", "").split()


def _as_root_args():
    # mariadbd refuses to run as root unless told to.
    return ["--user=root"] if os.geteuid() == 0 else []


def make_pristine_datadir(dest: Path):
    """mariadb-install-db into dest, plus an empty `test` database."""
    log = dest.parent / "install-db.log"
    with open(log, "w") as out:
        rc = subprocess.call(
            [_tool("mariadb-install-db"), "--no-defaults", f"--datadir={dest}",
             "--auth-root-authentication-method=normal", "--skip-test-db"] + SERVER_ROOT_ARGS + INNODB_ARGS
            + _as_root_args(),
            stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        raise RuntimeError(f"mariadb-install-db failed (rc={rc}):\n{log.read_text()[-3000:]}")
    # A directory in the datadir is a database.
    (dest / "test").mkdir()


def scratch(prefix):
    """A temp dir for servers outside the test suite (scripts that measure): (root, a pristine
    datadir, a snapshot of build/plugin), as the suite's fixtures make them."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    make_pristine_datadir(root / "pristine")
    return root, root / "pristine", snapshot_plugin(root / "plugin")


def snapshot_plugin(dest: Path):
    """Copies build/plugin into dest, so a rebuild during the test session cannot swap the .so
    under running servers; returns dest."""
    if not PLUGIN_SO.exists():
        raise RuntimeError(f"{PLUGIN_SO} is missing: run `make plugin` first")
    shutil.copytree(PLUGIN_DIR, dest)
    return dest


class ServerDied(Exception):
    pass


def _names_option(args, *names):
    """Does any of `args` set one of the options `names` (e.g. "log-bin": --log-bin,
    --log-bin=x, --log_bin=x; the server reads - and _ alike)?"""
    for a in args:
        name = a.split("=", 1)[0].lstrip("-").replace("_", "-")
        if name in names:
            return True
    return False


def binlog_args(root, args):
    """What a server gets on top of `args` so that its binary log is on, as on `./q4m.sh run`'s
    server (--log-bin, --server-id=1; the server's default binlog_format, MIXED): nothing for
    an option `args` sets itself (its own --log-bin, --skip-log-bin, --server-id...)."""
    extra = []
    if not _names_option(args, "log-bin", "skip-log-bin", "disable-log-bin"):
        extra.append(f"--log-bin={Path(root) / 'binlog' / 'q4m-bin'}")
    if not _names_option(args, "server-id"):
        extra.append("--server-id=1")
    return extra


class Server:
    """One mariadbd process over one datadir. start()/stop()/kill9()/restart() keep the datadir.

    The binary log is on unless `binlog=False` or the server's own args say how (--skip-log-bin,
    --log-bin=...): the configuration `./q4m.sh run` and the docs recommend (issue 40), synced at
    every commit (--sync-binlog=1, unless the args say otherwise). Its files are in root/binlog,
    out of the datadir (a copy of the datadir does not carry them)."""

    def __init__(self, root: Path, pristine: Path, extra_args=(), plugin_dir=PLUGIN_DIR, binlog=True, datadir=None):
        """datadir: where the copy of pristine goes (default root/data); the power-cut test puts
        it on a loop-mounted image while the socket and error log stay in root."""
        self.root = Path(root)
        self.binlog_default = binlog
        self.plugin_dir = Path(plugin_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.datadir = Path(datadir) if datadir else self.root / "data"
        self.socket = self.root / "mysqld.sock"
        self.errlog_path = self.root / "mysqld.err"
        self.extra_args = list(extra_args)
        self.proc = None
        self._conns = []
        self._admin = None
        shutil.copytree(pristine, self.datadir, symlinks=True)

    # ---- lifecycle ---------------------------------------------------------
    def start(self, extra_args=None):
        assert not self.alive(), "server already running"
        args = [_tool("mariadbd"), "--no-defaults", f"--datadir={self.datadir}",
                f"--socket={self.socket}", "--skip-networking", f"--plugin-dir={self.plugin_dir}",
                f"--log-error={self.errlog_path}", f"--pid-file={self.root / 'mysqld.pid'}",
                "--skip-name-resolve", "--max-connections=300",
                "--local-infile=1", f"--secure-file-priv={self.root}"] + SERVER_ROOT_ARGS + INNODB_ARGS + SERVER_ONLY_ARGS + _as_root_args()
        own = self.extra_args + list(extra_args or [])
        if self.binlog_default:
            own = binlog_args(self.root, own) + own
        self.binlog = not _names_option(own, "skip-log-bin", "disable-log-bin") and _names_option(own, "log-bin")
        if self.binlog and not _names_option(own + SERVER_ONLY_ARGS, "sync-binlog"):
            # The configuration users run (./q4m.sh run): the binary log synced at every commit,
            # the durability point QUEUE's redo rides (queue_binlog_redo applies only then).
            own = own + ["--sync-binlog=1"]
        args += own
        if self.binlog:
            (self.root / "binlog").mkdir(exist_ok=True)
        self._log_mark = self.errlog_path.stat().st_size if self.errlog_path.exists() else 0
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                raise ServerDied(f"mariadbd exited with {self.proc.returncode} during start\n"
                                 + self.diagnostics())
            try:
                self._raw_connect(db=None).close()
                break
            except pymysql.MySQLError:
                if time.monotonic() > deadline:
                    self.kill9()
                    raise ServerDied("mariadbd did not answer within "
                                     f"{START_TIMEOUT_S}s\n" + self.diagnostics())
                time.sleep(0.05)
        return self

    def install_plugin(self):
        """INSTALL SONAME 'ha_queue' unless the engine is already loaded (idempotent)."""
        if not self.value("SELECT COUNT(*) FROM information_schema.ENGINES WHERE ENGINE='QUEUE'"):
            self.sql("INSTALL SONAME 'ha_queue'")

    def stop(self):
        """Clean shutdown (SIGTERM), waits for exit."""
        self._close_conns()
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill9()
                raise ServerDied(f"clean shutdown took more than {STOP_TIMEOUT_S}s\n"
                                 + self.diagnostics())
        rc = self.proc.returncode
        self.proc = None
        if rc != 0:
            raise ServerDied(f"mariadbd exited with {rc} on shutdown\n" + self.diagnostics())

    def kill9(self):
        self._kill_process()
        self._close_conns()

    def _kill_process(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def kill9_under_load(self, workers, seconds):
        """Runs each of `workers` (callables taking a threading.Event that is set when they should
        stop) in a thread, kills the server after `seconds`, then stops and joins them."""
        import threading
        stop = threading.Event()
        threads = [threading.Thread(target=w, args=(stop,)) for w in workers]
        for t in threads:
            t.start()
        time.sleep(seconds)
        # Their connections are closed only once they are done: closed under a thread that is
        # reading, pymysql fails with AttributeError instead of the lost connection's error.
        self._kill_process()
        stop.set()
        for t in threads:
            t.join(60)
        self._close_conns()

    def restart(self, kill=False, extra_args=None):
        self.kill9() if kill else self.stop()
        return self.start(extra_args)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def destroy(self, keep_dir=False):
        self.kill9()
        if not keep_dir and not os.environ.get("Q4M_KEEP_TMP"):
            shutil.rmtree(self.root, ignore_errors=True)

    # ---- clients -----------------------------------------------------------
    def _raw_connect(self, db="test", **kw):
        kw.setdefault("read_timeout", READ_TIMEOUT_S)
        kw.setdefault("write_timeout", READ_TIMEOUT_S)
        kw.setdefault("autocommit", True)
        return pymysql.connect(unix_socket=str(self.socket), user="root", password="",
                               database=db, connect_timeout=10, **kw)

    def connect(self, db="test", **kw):
        """A new client connection (closed automatically at teardown/stop)."""
        c = self._raw_connect(db=db, **kw)
        self._conns.append(c)
        return c

    def _close_conns(self):
        for c in self._conns + ([self._admin] if self._admin else []):
            try:
                c.close()
            except Exception:
                pass
        self._conns = []
        self._admin = None

    def admin(self):
        """A shared helper connection for sql()/value()."""
        if self._admin is None or not self._admin.open:
            self._admin = self._raw_connect()
        return self._admin

    def sql(self, query, args=None, conn=None):
        """Runs one statement; returns all rows (tuples). Raises ServerDied if mariadbd died."""
        c = conn or self.admin()
        try:
            with c.cursor() as cur:
                cur.execute(query, args)
                return list(cur.fetchall())
        except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
            self.check_alive(f"while running {query!r}")
            raise

    def value(self, query, args=None, conn=None):
        rows = self.sql(query, args, conn)
        assert len(rows) == 1 and len(rows[0]) == 1, f"{query!r} returned {rows!r}"
        return rows[0][0]

    def queue_stats(self, table):
        """queue_stats('db.table') as a dict: the table's counters (docs/sql-api.md)."""
        return json.loads(self.value("SELECT queue_stats(%s)", (table,)))

    def check_alive(self, context=""):
        if self.proc is not None and self.proc.poll() is not None:
            rc = self.proc.returncode
            raise ServerDied(f"mariadbd died (exit {rc}) {context}\n" + self.diagnostics())

    # ---- logs ----------------------------------------------------------------
    def err_log(self, tail=None):
        try:
            text = self.errlog_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no error log)"
        if tail is not None:
            text = "\n".join(text.splitlines()[-tail:])
        return text

    def crash_report(self):
        """The server's own report of a fatal signal or failed assertion, if the log has one
        (the signal line and the stack: a log tail alone cuts them off), else ''."""
        lines = self.err_log().splitlines()
        for i, line in enumerate(lines):
            if "got signal" in line or "Assertion" in line or "Failing assertion" in line:
                return "\n".join(lines[max(0, i - 2):i + 40])
        return ""

    def diagnostics(self):
        """What a ServerDied message shows: the crash report (when there is one), then the log tail."""
        report = self.crash_report()
        return (f"-- crash report --\n{report}\n-- log tail --\n" if report else "") + self.err_log(tail=60)

    def err_log_since_start(self):
        text = self.errlog_path.read_bytes()[getattr(self, "_log_mark", 0):]
        return text.decode(errors="replace")
