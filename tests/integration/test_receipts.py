"""Receipts (docs/sql-api.md, "Receipts"): rows taken with queue_receive() are held on behalf
of no connection; any connection ends, gives back or renews them by receipt."""
import random
import threading
import time

import pymysql
import pytest

from binlog_modes import both_binlog_modes
from replication_pair import Pair

RECEIVE = "SELECT id, queue_receipt() FROM jobs WHERE queue_receive('jobs', %s, %s, %s)"


def make_jobs(s, n, options=""):
    s.sql(f"CREATE TABLE jobs (id INT) ENGINE=QUEUE {options}")
    s.sql("INSERT INTO jobs VALUES " + ",".join(f"({i})" for i in range(1, n + 1)))


def receive(s, conn, lease=60, n=1, timeout=0):
    return s.sql(RECEIVE, (lease, n, timeout), conn=conn)


def owned_rows(s):
    return s.value("SELECT OWNED_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'")


def eventually(cond, seconds=30):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def error_of(s, query, args=None, conn=None):
    with pytest.raises(pymysql.MySQLError) as e:
        s.sql(query, args, conn=conn)
    return e.value.args


@both_binlog_modes
def test_rows_received_by_one_connection_are_ended_by_others_and_outlive_it(server):
    make_jobs(server, 5)
    taker = server.connect()
    got = receive(server, taker, n=3)
    assert [r[0] for r in got] == [1, 2, 3]
    receipts = [r[1] for r in got]
    assert all(r.startswith(f"{i}:") for i, r in zip([1, 2, 3], receipts)) and len(set(receipts)) == 3
    # Not owner mode: the taker sees the queue as anyone does, without the received rows.
    assert sorted(r[0] for r in server.sql("SELECT id FROM jobs", conn=taker)) == [4, 5]
    assert server.sql("SELECT queue_rowid()", conn=taker) == [(None,)]
    # Its next wait does not end them, and closing it does not give them back.
    assert server.value("SELECT queue_wait('jobs', 0)", conn=taker) == 1
    assert server.value("SELECT queue_end()", conn=taker) == 1
    taker.close()
    assert owned_rows(server) == 3
    assert server.value("SELECT COUNT(*) FROM jobs") == 1  # row 5
    # Other connections end them by receipt, one or several at once.
    assert server.value("SELECT queue_end_receipt('jobs', %s)", (receipts[1],), conn=server.connect()) == 1
    assert server.value("SELECT queue_end_receipt('test.jobs', %s)", (f"{receipts[0]} , {receipts[2]}",),
                        conn=server.connect()) == 2
    assert owned_rows(server) == 0
    assert [r[0] for r in server.sql("SELECT id FROM jobs")] == [5]
    stats = server.queue_stats("test.jobs")
    assert stats["rows"] == 1


@both_binlog_modes
def test_a_stale_receipt_fails_with_a_clear_error_and_changes_nothing(server):
    make_jobs(server, 2)
    (first,) = receive(server, server.connect(), lease=0.3)
    assert eventually(lambda: owned_rows(server) == 0)  # its lease ran out: the row is back
    err = error_of(server, "SELECT queue_end_receipt('jobs', %s)", (first[1],))
    assert err[0] == 1205 and "table 'test.jobs'" in err[1] and first[1] in err[1] and "lease (0.3 s) ran out" in err[1]
    again = receive(server, server.connect(), n=2)
    assert [r[0] for r in again] == [1, 2]  # row 1 delivered again, under a new receipt
    assert again[0][1] != first[1]
    # The earlier delivery's receipt ends nothing, alone or in a list with valid ones.
    for receipts in (first[1], f"{again[0][1]},{first[1]}", f"{again[1][1]},{again[1][1]}"):
        err = error_of(server, "SELECT queue_end_receipt('jobs', %s)", (receipts,), conn=server.connect())
        assert "nothing was changed" in err[1] and "table 'test.jobs'" in err[1], err
    err = error_of(server, "SELECT queue_renew_receipt('jobs', %s, 10)", (first[1],))
    assert "earlier delivery of row 1" in err[1]
    assert owned_rows(server) == 2 and server.queue_stats("test.jobs")["rows"] == 2
    assert server.value("SELECT queue_end_receipt('jobs', %s)", (f"{again[0][1]},{again[1][1]}",)) == 2
    assert server.queue_stats("test.jobs")["rows"] == 0


def test_abort_with_a_delay_renew_and_dead_letters(server):
    make_jobs(server, 1, "MAX_DELIVERIES=2")
    (r,) = receive(server, server.connect(), lease=5)
    assert server.value("SELECT queue_renew_receipt('jobs', %s, 600)", (r[1],), conn=server.connect()) == 1
    assert server.value("SELECT LEASE_LEFT_MS FROM information_schema.QUEUE_OWNED_ROWS") > 60000
    assert server.value("SELECT CONNECTION_ID FROM information_schema.QUEUE_OWNED_ROWS") == 0  # the table's
    assert server.value("SELECT queue_abort_receipt('jobs', %s, 2)", (r[1],), conn=server.connect()) == 1
    assert server.sql("SELECT queue_scan_state() FROM jobs") == [("delayed",)]
    assert receive(server, server.connect()) == []
    (r2,) = receive(server, server.connect(), timeout=30)  # after the delay
    assert r2[0] == 1 and r2[1] != r[1]
    err = error_of(server, "SELECT queue_abort_receipt('jobs', %s)", (r[1],))
    assert err[0] == 1205
    assert server.value("SELECT queue_abort_receipt('jobs', %s)", (r2[1],)) == 1
    assert server.sql("SELECT queue_scan_state() FROM jobs") == [("dead",)]  # MAX_DELIVERIES=2
    assert receive(server, server.connect()) == []


def test_bad_arguments_are_clear_errors(server):
    make_jobs(server, 1)
    c = server.connect()
    for query, errno, text in [
        ("SELECT queue_receive('jobs', 0)", 1210, "queue_receive(): argument 2: invalid lease 0"),
        ("SELECT queue_receive('jobs', NULL)", 1210, "queue_receive(): argument 2: invalid lease NULL"),
        ("SELECT queue_receive('jobs', -1)", 1210, "invalid lease -1"),
        ("SELECT queue_receive('jobs', 10, 0)", 1210, "queue_receive(): argument 3: invalid max_rows 0"),
        ("SELECT queue_receive('jobs', 10, 1, -1)", 1210, "queue_receive(): argument 4: invalid timeout -1"),
        ("SELECT queue_receive('jobs')", 1582, "queue_receive() takes 2 to 4 arguments"),
        ("SELECT queue_receive('nope', 10)", 1146, "table 'test.nope' does not exist"),
        ("SELECT queue_end_receipt('jobs', '1:zz')", 1210,
         "queue_end_receipt(): table 'test.jobs': '1:zz' is not a receipt"),
        ("SELECT queue_end_receipt('jobs', '')", 1210, "queue_end_receipt(): argument 2: no receipt given"),
        ("SELECT queue_end_receipt('jobs', NULL)", 1210, "queue_end_receipt(): argument 2: receipts is NULL"),
        ("SELECT queue_end_receipt('jobs')", 1582, "queue_end_receipt() takes 2 arguments"),
        ("SELECT queue_abort_receipt('jobs', '1:0000000000000001.1', -2)", 1210,
         "queue_abort_receipt(): argument 3: invalid delay -2"),
        ("SELECT queue_renew_receipt('jobs', '1:0000000000000001.1', 0)", 1210,
         "queue_renew_receipt(): argument 3: invalid lease 0"),
        ("SELECT queue_renew_receipt('jobs', '1:0000000000000001.1', 5)", 1205,
         "receipt '1:0000000000000001.1' was not given since the table was last opened"),
    ]:
        err = error_of(server, query, conn=c)
        assert err[0] == errno and text in err[1], (query, err)
    # A connection in owner mode is told to leave it first.
    assert server.value("SELECT queue_wait('jobs', 0)", conn=c) == 1
    err = error_of(server, "SELECT queue_receive('jobs', 10)", conn=c)
    assert "this connection is in owner mode" in err[1]
    assert server.value("SELECT queue_abort()", conn=c) == 1
    # Privileges: taking needs SELECT and DELETE, acting by receipt DELETE.
    server.sql("CREATE USER reader@localhost")
    server.sql("GRANT SELECT ON test.* TO reader@localhost")
    try:
        ro = pymysql.connect(unix_socket=str(server.socket), user="reader", database="test", autocommit=True)
        for q in ("SELECT queue_receive('jobs', 10)", "SELECT queue_end_receipt('jobs', '1:0000000000000001.1')"):
            err = error_of(server, q, conn=ro)
            assert err[0] == 1142 and "DELETE command denied" in err[1], err
        ro.close()
    finally:
        server.sql("DROP USER reader@localhost")


@both_binlog_modes
def test_an_end_in_a_rolled_back_transaction_gives_the_row_back(server):
    make_jobs(server, 1)
    server.sql("CREATE TABLE results (id INT) ENGINE=InnoDB")
    (r,) = receive(server, server.connect())
    c = server.connect()
    server.sql("BEGIN", conn=c)
    server.sql("INSERT INTO results VALUES (1)", conn=c)
    assert server.value("SELECT queue_end_receipt('jobs', %s)", (r[1],), conn=c) == 1
    server.sql("ROLLBACK", conn=c)
    assert server.value("SELECT COUNT(*) FROM results") == 0
    (again,) = receive(server, server.connect())  # back in the queue, delivered again
    assert again[0] == 1
    server.sql("BEGIN", conn=c)
    server.sql("INSERT INTO results VALUES (1)", conn=c)
    assert server.value("SELECT queue_end_receipt('jobs', %s)", (again[1],), conn=c) == 1
    server.sql("COMMIT", conn=c)
    assert server.value("SELECT COUNT(*) FROM results") == 1
    assert server.queue_stats("test.jobs")["rows"] == 0


class Pool:
    """A connection pool that hands each statement another connection."""

    def __init__(self, s, size=4):
        self.conns = [s.connect() for _ in range(size)]

    def get(self):
        return random.choice(self.conns)


def worker_loop(s, pool, stop, skipped, lease):
    """Receive a few jobs, then for each: its result row and its end by receipt in one
    transaction, each statement on whatever connection the pool gives. The first delivery of
    every 7th job is left to its lease (a worker that hung)."""
    while not stop.is_set():
        try:
            c = pool.get()
            rows = s.sql(RECEIVE, (lease, 3, 0.2), conn=c)
            if not rows and s.value("SELECT COUNT(*) FROM jobs", conn=pool.get()) == 0 and owned_rows(s) == 0:
                return
            for job, receipt in rows:
                if job % 7 == 0 and job not in skipped:
                    skipped.add(job)
                    continue
                c = pool.get()  # (a transaction keeps its connection until its end)
                s.sql("BEGIN", conn=c)
                s.sql("INSERT INTO results VALUES (%s)", (job,), conn=c)
                s.sql("SELECT queue_end_receipt('jobs', %s)", (receipt,), conn=c)
                s.sql("COMMIT", conn=c)
        except pymysql.MySQLError:
            if stop.is_set() or not s.alive():
                return
            try:
                s.sql("ROLLBACK", conn=c)
            except pymysql.MySQLError:
                return


@both_binlog_modes
def test_a_pool_processes_every_job_exactly_once_across_kill_9_and_lease_expiry(server_factory, binlog):
    # The engine loaded at startup: two-phase commit with InnoDB without the binary log too.
    s = server_factory.new(at_startup=True, binlog=binlog)
    try:
        n = 120
        make_jobs(s, n)
        s.sql("CREATE TABLE results (id INT) ENGINE=InnoDB")
        skipped = set()
        pool = Pool(s)
        stop = threading.Event()
        t = threading.Thread(target=worker_loop, args=(s, pool, stop, skipped, 0.5))
        t.start()
        assert eventually(lambda: s.value("SELECT COUNT(*) FROM results") >= n // 3, 60)
        s.kill9()  # mid-run: received rows not ended come back, committed ones stay ended
        stop.set()
        t.join(60)
        s.start()
        pool, stop = Pool(s), threading.Event()
        worker_loop(s, pool, stop, skipped, 0.5)
        results = [r[0] for r in s.sql("SELECT id FROM results ORDER BY id")]
        assert results == list(range(1, n + 1))  # each exactly once
        assert s.queue_stats("test.jobs")["rows"] == 0
        assert len(skipped) >= 5  # leases ran out, and their jobs were done on a later delivery
    finally:
        s.destroy()


def test_a_replica_removes_the_rows_ended_by_receipt(server_factory):
    pair = Pair(server_factory)
    try:
        p = pair.primary
        make_jobs(p, 6)
        p.sql("CREATE TABLE results (id INT) ENGINE=InnoDB")
        got = receive(p, p.connect(), n=4)
        assert p.value("SELECT queue_end_receipt('jobs', %s)", (f"{got[0][1]},{got[2][1]}",), conn=p.connect()) == 2
        c = p.connect()
        p.sql("BEGIN", conn=c)
        p.sql("INSERT INTO results VALUES (4)", conn=c)
        assert p.value("SELECT queue_end_receipt('jobs', %s)", (got[3][1],), conn=c) == 1
        p.sql("COMMIT", conn=c)
        pair.sync()
        r = pair.replica
        # Row 2 is held by its receipt on the primary (in flight): queued on the replica.
        assert [x[0] for x in r.sql("SELECT id FROM jobs ORDER BY id")] == [2, 5, 6]
        assert r.sql("SELECT id FROM results") == [(4,)]
        assert p.value("SELECT queue_end_receipt('jobs', %s)", (got[1][1],)) == 1
        pair.sync()
        assert r.sql("SELECT queue_scan_rowid(), id FROM jobs ORDER BY 1") == \
            p.sql("SELECT queue_scan_rowid(), id FROM jobs ORDER BY 1") == [(5, 5), (6, 6)]
    finally:
        pair.destroy()


def test_groups_and_limits_apply_to_rows_held_by_receipts(server):
    server.sql("CREATE TABLE jobs (id INT, k VARCHAR(8)) ENGINE=QUEUE MESSAGE_GROUP_COLUMN='k' MAX_IN_FLIGHT=3")
    server.sql("INSERT INTO jobs VALUES (1,'a'),(2,'a'),(3,'b'),(4,'c'),(5,'d')")
    got = receive(server, server.connect(), n=10)
    assert [r[0] for r in got] == [1, 3, 4]  # one per group (FIFO), three at most in flight
    assert receive(server, server.connect()) == []
    assert server.value("SELECT queue_end_receipt('jobs', %s)", (got[0][1],)) == 1
    assert [r[0] for r in receive(server, server.connect(), n=10)] == [2]  # group a's next
    # A condition picks rows as queue_wait('jobs:...') does.
    server.sql("DELETE FROM jobs")  # (the held rows stay)
    server.sql("CREATE TABLE q2 (id INT) ENGINE=QUEUE")
    server.sql("INSERT INTO q2 VALUES (1),(2),(3)")
    assert server.sql("SELECT id FROM q2 WHERE queue_receive('q2:id > 1', 60, 5)") == [(2,), (3,)]


def test_kill_query_ends_a_waiting_receive(server):
    server.sql("CREATE TABLE jobs (id INT) ENGINE=QUEUE")
    c = server.connect()
    result = {}

    def wait():
        try:
            result["rows"] = server.sql(RECEIVE, (60, 1, 60), conn=c)
        except pymysql.MySQLError as e:
            result["error"] = e.args

    t = threading.Thread(target=wait)
    t.start()
    assert eventually(lambda: server.value(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID=%s AND STATE='Waiting for a queue row'",
        (c.thread_id(),)) == 1)
    server.sql(f"KILL QUERY {c.thread_id()}")
    t.join(30)
    assert not t.is_alive() and result.get("error", (0,))[0] == 1317, result
    server.sql("INSERT INTO jobs VALUES (1)")
    assert [r[0] for r in receive(server, c)] == [1]  # the connection goes on


def test_receipts_survive_a_copying_alter_table(server):
    make_jobs(server, 2)
    got = receive(server, server.connect(), n=2)
    server.sql("ALTER TABLE jobs ADD COLUMN note TEXT")  # a copy: the rows keep their holders
    assert server.value("SELECT queue_end_receipt('jobs', %s)", (got[0][1],)) == 1
    assert server.value("SELECT queue_abort_receipt('jobs', %s)", (got[1][1],)) == 1
    assert server.sql("SELECT id FROM jobs") == [(2,)]


def test_a_restart_gives_received_rows_back_and_their_receipts_go_stale(fresh_server):
    s = fresh_server
    make_jobs(s, 2)
    receive(s, s.connect(), n=2)
    s.restart()  # a clean shutdown with rows held by receipts: they go back first
    assert s.queue_stats("test.jobs")["rows"] == 2 and owned_rows(s) == 0
    got = receive(s, s.connect(), n=2)
    s.restart(kill=True)
    assert s.queue_stats("test.jobs")["rows"] == 2 and owned_rows(s) == 0
    err = error_of(s, "SELECT queue_end_receipt('jobs', %s)", (got[0][1],))
    assert err[0] == 1205 and "since the table was last opened" in err[1] and got[0][1] in err[1]
    again = receive(s, s.connect(), n=2)
    assert [r[0] for r in again] == [1, 2] and again[0][1] != got[0][1]
    assert s.value("SELECT queue_end_receipt('jobs', %s)", (f"{again[0][1]},{again[1][1]}",)) == 2


def test_the_python_helpers_take_on_one_connection_and_end_on_another(server):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    from q4m_worker import abort_receipts, end_receipts, receive as take, renew_receipts
    from q4m_worker.errors import is_lease_lost

    server.sql("CREATE TABLE jobs (id INT, body TEXT) ENGINE=QUEUE")
    server.sql("CREATE TABLE results (id INT) ENGINE=InnoDB")
    server.sql("INSERT INTO jobs VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    a, b = server.connect(), server.connect()
    got = take(a, "jobs", lease=60, max_rows=2)
    assert [r.row for r in got] == [{"id": 1, "body": "a"}, {"id": 2, "body": "b"}]
    assert take(a, "test.jobs", lease=60, condition="id = 3")[0].row["id"] == 3
    assert renew_receipts(b, "jobs", [r.receipt for r in got], 120) == 2
    b.begin()
    with b.cursor() as cur:
        cur.execute("INSERT INTO results VALUES (1)")
    assert end_receipts(b, "jobs", got[0].receipt) == 1
    b.commit()
    assert abort_receipts(b, "jobs", [got[1].receipt], delay=0) == 1
    with pytest.raises(pymysql.MySQLError) as e:
        end_receipts(a, "jobs", got[1].receipt)
    assert is_lease_lost(e.value)
    assert server.value("SELECT COUNT(*) FROM results") == 1
    assert sorted(r[0] for r in server.sql("SELECT id FROM jobs")) == [2]  # 3 is held


def test_the_dashboard_shows_a_row_held_by_a_receipt_without_a_connection_to_end(server, tmp_path):
    from monitor_harness import Client, Monitor
    make_jobs(server, 1)
    receive(server, server.connect())
    m = Monitor(server, tmp_path)
    try:
        c = Client(m)
        assert c.login("root", "").status == 303
        page = c.request("/queue?schema=test&table=jobs")
        assert page.status == 200
        assert "a receipt" in page.text and "give back" in page.text
        assert "end connection" not in page.text  # KILL 0 would fail: no connection holds it
    finally:
        m.stop()
