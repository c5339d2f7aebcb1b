"""Small helpers the integration tests share: error assertions and background statements."""
import threading
import time

import pymysql

ER_QUERY_INTERRUPTED = 1317
ER_NO_SUCH_TABLE = 1146


def query(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def value(conn, sql, args=None):
    rows = query(conn, sql, args)
    assert len(rows) == 1 and len(rows[0]) == 1, f"{sql!r} returned {rows!r}"
    return rows[0][0]


def sql_error(conn, sql, args=None):
    """Runs sql, which must fail; returns (errno, message)."""
    try:
        rows = query(conn, sql, args)
    except pymysql.MySQLError as e:
        code = e.args[0] if e.args else None
        msg = e.args[1] if len(e.args) > 1 else str(e)
        return code, msg
    raise AssertionError(f"{sql!r} succeeded with {rows!r}; an error was expected")


def expect_error(conn, sql, *fragments, args=None, code=None):
    """sql must fail with a message containing every fragment (and errno `code` if given)."""
    errno, msg = sql_error(conn, sql, args)
    for f in fragments:
        assert f in msg, f"{sql!r}: error {errno} {msg!r} does not contain {f!r}"
    if code is not None:
        assert errno == code, f"{sql!r}: errno {errno} ({msg!r}), expected {code}"
    return errno, msg


class Background:
    """Runs fn() in a thread; .join() returns its result or re-raises its exception."""

    def __init__(self, fn, *args):
        self.result = None
        self.error = None
        self.started = time.monotonic()
        self.finished = None
        self._thread = threading.Thread(target=self._run, args=(fn,) + args, daemon=True)
        self._thread.start()

    def _run(self, fn, *args):
        try:
            self.result = fn(*args)
        except BaseException as e:  # noqa: B902 - handed to the joining test
            self.error = e
        finally:
            self.finished = time.monotonic()

    def done(self):
        return not self._thread.is_alive()

    def join(self, timeout=120):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"background statement still running after {timeout}s"
        if self.error is not None:
            raise self.error
        return self.result

    @property
    def elapsed(self):
        return (self.finished or time.monotonic()) - self.started


def wait_until(predicate, timeout=30, interval=0.02, what="condition"):
    """Polls predicate() until true; fails after timeout (never a pass/fail on timing itself)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(interval)


def wait_for_waiter(server, conn_id, timeout=30):
    """Waits until connection conn_id is running a statement (e.g. blocked in queue_wait)."""
    def running():
        rows = server.sql("SELECT COMMAND, INFO FROM information_schema.PROCESSLIST WHERE ID=%s",
                          (conn_id,))
        return bool(rows) and rows[0][0] == "Query" and rows[0][1] is not None
    wait_until(running, timeout, what=f"connection {conn_id} to be running a statement")


WAITING_FOR_ROW = "Waiting for a queue row"  # the processlist state of a sleeping queue_wait()


def start_waiter(server, sql):
    """Runs a queue_wait() statement that blocks on a new connection in the background and
    returns (conn, Background) once it sleeps, registered as a waiter (its processlist state)."""
    c = server.connect()
    bg = Background(lambda: value(c, sql))
    wait_for_waiter(server, c.thread_id())

    def sleeping():
        state = server.value("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID=%s", (c.thread_id(),))
        return state == WAITING_FOR_ROW
    wait_until(sleeping, what=f"connection {c.thread_id()} to sleep in queue_wait()")
    return c, bg


def owned_row_id(c, table="q", column="v"):
    """(column value, queue_rowid()) of the row connection c owns."""
    return value(c, f"SELECT {column} FROM {table}"), value(c, "SELECT queue_rowid()")


def insert_job(c, producer, seq, with_order):
    """Row (producer, seq) into test.jobs (a QUEUE table); with_order: in one transaction with
    its row in test.orders (InnoDB), as an outbox does."""
    if not with_order:
        query(c, "INSERT INTO test.jobs VALUES (%s, %s)", (producer, seq))
        return
    query(c, "BEGIN")
    query(c, "INSERT INTO test.orders VALUES (%s, %s)", (producer, seq))
    query(c, "INSERT INTO test.jobs VALUES (%s, %s)", (producer, seq))
    query(c, "COMMIT")


def consume_job(c, in_transaction, taken=None, with_result=False):
    """Takes a row of test.jobs (waiting up to 1 s) and ends it, in one transaction if
    in_transaction (with its row in test.results if with_result: exactly-once processing).
    Returns the (producer, seq) rows ended, none on a timeout; `taken` (a set) gets the row as
    soon as it is handed out."""
    if in_transaction:
        query(c, "BEGIN")
    got = query(c, "SELECT producer, seq FROM test.jobs WHERE queue_wait('test.jobs', 1)")
    if taken is not None:
        taken.update(got)
    if got:
        query(c, "SELECT queue_end()")
        if with_result:
            query(c, "INSERT INTO test.results VALUES (%s, %s)", got[0])
    if in_transaction:
        query(c, "COMMIT")
    return got
