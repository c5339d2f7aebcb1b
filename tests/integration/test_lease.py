"""Leases (queue_lease_timeout): a row its owner neither ends nor aborts in time goes back to
the queue, and the owner is told when it next calls queue_end() or queue_wait()."""
import json
import random
import threading
import time

import pymysql

from sqlcheck import Background, expect_error, query, start_waiter, value, wait_until

ER_LOCK_WAIT_TIMEOUT = 1205  # lease expired: the number drivers retry on


def _queue(server, n):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))


def _lease_expiries(server):
    return json.loads(server.value("SELECT queue_stats('test.q')"))["lease_expiries"]


def test_the_variable_is_off_by_default_and_per_session(server):
    assert float(server.value("SELECT @@GLOBAL.queue_lease_timeout")) == 0
    c = server.connect()
    assert float(value(c, "SELECT @@SESSION.queue_lease_timeout")) == 0
    query(c, "SET SESSION queue_lease_timeout = 2.5")
    assert float(value(c, "SELECT @@SESSION.queue_lease_timeout")) == 2.5
    assert float(server.value("SELECT @@GLOBAL.queue_lease_timeout")) == 0
    server.sql("SET GLOBAL queue_lease_timeout = 30")
    assert float(value(server.connect(), "SELECT @@SESSION.queue_lease_timeout")) == 30  # new sessions
    assert float(value(c, "SELECT @@SESSION.queue_lease_timeout")) == 2.5  # not this one


def test_bad_values_are_refused_or_clamped_with_a_warning(server):
    c = server.connect()
    expect_error(c, "SET SESSION queue_lease_timeout = 'soon'", "queue_lease_timeout")
    query(c, "SET SESSION queue_lease_timeout = -1")  # numeric sysvars clamp, and say so
    warnings = query(c, "SHOW WARNINGS")
    assert any("queue_lease_timeout" in w[2] for w in warnings), warnings
    assert float(value(c, "SELECT @@SESSION.queue_lease_timeout")) == 0


def test_an_expired_row_goes_to_a_waiter_and_its_owner_is_told(server):
    _queue(server, 1)
    a = server.connect()
    query(a, "SET SESSION queue_lease_timeout = 1.5")  # outlasts start_waiter on a busy machine
    assert query(a, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    rowid = value(a, "SELECT queue_rowid()")
    b, waiting = start_waiter(server, "SELECT queue_wait('test.q', 60)")
    assert waiting.join() == 1  # handed over when a's lease ran out
    assert query(b, "SELECT v FROM q") == [(1,)]
    assert value(b, "SELECT queue_rowid()") == rowid
    assert _lease_expiries(server) == 1

    expect_error(a, "SELECT queue_end()", "queue_end(): lease expired: table 'test.q'",
                 f"row {rowid} (1.5 s)", "went back to the queue", "not removed", code=ER_LOCK_WAIT_TIMEOUT)
    expect_error(a, "SELECT queue_end()", "does not own a row")  # owner mode was left
    assert value(b, "SELECT queue_end()") == 1  # b had no lease
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_queue_wait_reports_the_expired_lease_then_works_again(server):
    _queue(server, 2)
    a = server.connect()
    query(a, "SET SESSION queue_lease_timeout = 0.2")
    assert query(a, "SELECT v FROM q WHERE queue_wait('q')") == [(1,)]
    wait_until(lambda: _lease_expiries(server) == 1, what="the lease to run out")
    expect_error(a, "SELECT * FROM q WHERE queue_wait('q')", "queue_wait(): lease expired: table 'test.q'", "row 1 (0.2 s)")
    assert value(a, "SELECT queue_rowid()") is None
    query(a, "SET SESSION queue_lease_timeout = 0")
    assert query(a, "SELECT v FROM q WHERE queue_wait('q')") == [(1,)]  # delivered again
    assert query(a, "SELECT v FROM q WHERE queue_wait('q')") == [(2,)]
    assert value(a, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def _global_lease_expiries(server):
    return int(dict((r[1], r[2]) for r in server.sql("SHOW ENGINE QUEUE STATUS"))["lease_expiries"])


def test_a_row_ended_in_time_is_removed_and_abort_after_expiry_is_harmless(server):
    _queue(server, 2)
    before = _global_lease_expiries(server)
    a = server.connect()
    query(a, "SET SESSION queue_lease_timeout = 60")
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(a, "SELECT queue_end()") == 1
    query(a, "SET SESSION queue_lease_timeout = 0.1")
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    wait_until(lambda: _lease_expiries(server) == 1, what="the lease to run out")
    assert value(a, "SELECT queue_abort()") == 1  # the row is back already
    assert server.value("SELECT COUNT(*) FROM test.q") == 1
    assert _global_lease_expiries(server) == before + 1


def test_the_owned_row_is_invisible_to_its_former_owner_after_expiry(server):
    _queue(server, 1)
    a = server.connect()
    query(a, "SET SESSION queue_lease_timeout = 1")
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert query(a, "SELECT v FROM q") == [(1,)]
    wait_until(lambda: _lease_expiries(server) == 1, what="the lease to run out")
    assert query(a, "SELECT v FROM q") == []  # still in owner mode, but it owns nothing now
    assert server.value("SELECT COUNT(*) FROM test.q") == 1  # others see it queued again


def test_slow_consumers_with_short_leases_end_every_row_exactly_once(server):
    """Consumers whose work sometimes outlasts the lease: every row is ended successfully
    exactly once, none is lost, and a consumer that lost its lease is told."""
    n = 40
    _queue(server, n)
    ended, told, lock = [], [], threading.Lock()

    def consume(seed):
        rng = random.Random(seed)
        c = server.connect()
        query(c, "SET SESSION queue_lease_timeout = 0.15")
        while True:
            try:
                rows = query(c, "SELECT v FROM q WHERE queue_wait('q', 1)")
            except pymysql.MySQLError as e:
                assert "lease expired" in e.args[1], e
                with lock:
                    told.append(1)
                continue
            if not rows:
                with lock:
                    if len(ended) >= n:
                        return
                continue
            time.sleep(rng.choice([0, 0, 0.01, 0.3]))  # the work; sometimes too slow
            try:
                value(c, "SELECT queue_end()")
            except pymysql.MySQLError as e:
                assert "lease expired" in e.args[1], e
                with lock:
                    told.append(1)
                continue
            with lock:
                ended.append(rows[0][0])

    consumers = [Background(consume, i) for i in range(4)]
    for c in consumers:
        c.join()
    assert sorted(ended) == list(range(1, n + 1))
    assert told, "no lease ran out: this run tested nothing"
    assert _lease_expiries(server) == len(told)
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_leases_work_across_uninstall_and_reinstall(fresh_server):
    """UNINSTALL stops the lease thread with a deadline pending (the server must survive it);
    the first lease after INSTALL starts it again."""
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    s.sql("INSERT INTO test.q VALUES (1), (2)")
    c = s.connect()
    query(c, "SET SESSION queue_lease_timeout = 0.5")  # the reaper wakes for it after UNINSTALL
    assert value(c, "SELECT queue_wait('test.q', 0)") == 1
    c.close()
    s._close_conns()
    s.sql("FLUSH TABLES")
    s.sql("UNINSTALL SONAME 'ha_queue'")
    time.sleep(1.0)  # past the pending deadline
    s.check_alive("after UNINSTALL")
    s.sql("INSTALL SONAME 'ha_queue'")
    c = s.connect()
    query(c, "SET SESSION queue_lease_timeout = 0.1")
    assert value(c, "SELECT queue_wait('test.q', 0)") == 1
    wait_until(lambda: json.loads(s.value("SELECT queue_stats('test.q')"))["lease_expiries"] == 1,
               what="the lease to run out after reinstall")
    assert s.value("SELECT COUNT(*) FROM test.q") == 2


def test_renew_lease_keeps_a_slow_job_s_row(server):
    _queue(server, 2)
    a = server.connect()
    query(a, "SET SESSION queue_lease_timeout = 1")
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(a, "SELECT queue_renew_lease(30)") == 1  # a heartbeat of a long job
    time.sleep(1.5)  # past the session's lease
    assert _lease_expiries(server) == 0
    assert value(a, "SELECT queue_end()") == 1

    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(a, "SELECT queue_renew_lease()") == 1  # the session's 1 s again, from now
    wait_until(lambda: _lease_expiries(server) == 1, what="the renewed lease to run out")
    expect_error(a, "SELECT queue_renew_lease(10)", "queue_renew_lease(): lease expired: table 'test.q'",
                 "(1 s)", code=ER_LOCK_WAIT_TIMEOUT)
    assert value(a, "SELECT queue_rowid()") is None  # owner mode was left
    assert server.value("SELECT COUNT(*) FROM test.q") == 1


def test_renew_lease_can_start_a_lease_on_a_row_taken_without_one(server):
    _queue(server, 1)
    a = server.connect()
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(a, "SELECT queue_renew_lease(0.1)") == 1
    wait_until(lambda: _lease_expiries(server) == 1, what="the lease to run out")
    expect_error(a, "SELECT queue_end()", "lease expired", "(0.1 s)")


def test_renew_lease_bad_input(server):
    _queue(server, 1)
    a = server.connect()
    expect_error(a, "SELECT queue_renew_lease(5)", "queue_renew_lease(): this connection does not own a row")
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    for arg, shown in [("0", "0"), ("-1", "-1"), ("NULL", "NULL"), ("'soon'", "soon"), ("'5x'", "5x")]:
        expect_error(a, f"SELECT queue_renew_lease({arg})",
                     f"queue_renew_lease(): argument 1: invalid lease {shown} (expected a number of seconds > 0)")
    expect_error(a, "SELECT queue_renew_lease()", "no lease given, and queue_lease_timeout is 0")
    code, _ = expect_error(a, "SELECT queue_renew_lease(1, 2)", "queue_renew_lease() takes 0 or 1 argument")
    assert code == 1582
    assert value(a, "SELECT queue_renew_lease('2.5')") == 1  # a number as a string, as clients bind it
    assert value(a, "SELECT queue_end()") == 1


def test_a_tiny_positive_lease_is_a_lease_not_none(server):
    """0.0001 s rounds up to 1 ms (as queue_renew_lease() rounds), never down to "no lease"."""
    _queue(server, 1)
    a = server.connect()
    query(a, "SET SESSION queue_lease_timeout = 0.0001")
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    wait_until(lambda: _lease_expiries(server) == 1, what="the 1 ms lease to run out")
    expect_error(a, "SELECT queue_end()", "lease expired", "(0.001 s)")
