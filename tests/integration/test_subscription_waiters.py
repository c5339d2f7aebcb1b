"""A take waiting on a subscription ('events@a') is listed as its waiter, woken by a new row,
and told when the subscription is dropped (Subscriptions' waiter lists, a lock of their own)."""
import threading
import time

import pymysql

from sqlcheck import query


def _waiters(server, name):
    return server.value(
        "SELECT WAITERS FROM information_schema.QUEUE_SUBSCRIPTIONS "
        f"WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'events' AND SUBSCRIPTION_NAME = '{name}'")


def _wait_until(cond, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def _wait_in_thread(conn, source):
    """queue_wait(source, 60) on another thread: its rows, or the error it raised."""
    out = {}

    def run():
        try:
            out["rows"] = query(conn, f"SELECT id FROM test.events WHERE queue_wait('{source}', 60)")
        except pymysql.err.MySQLError as e:
            out["error"] = str(e)

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_waiter_is_listed_woken_by_a_new_row_and_told_of_a_drop(server):
    server.sql("CREATE TABLE test.events (id INT) ENGINE=QUEUE")
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("SELECT queue_subscribe('test.events', 'b')")

    t, out = _wait_in_thread(server.connect(), "test.events@a")
    _wait_until(lambda: _waiters(server, "a") == 1)
    assert _waiters(server, "b") == 0
    server.sql("INSERT INTO test.events VALUES (1)")
    t.join(60)
    assert out == {"rows": [(1,)]}
    assert _waiters(server, "a") == 0

    c = server.connect()
    assert query(c, "SELECT id FROM test.events WHERE queue_wait('test.events@b', 0)") == [(1,)]
    query(c, "SELECT queue_end()")
    t, out = _wait_in_thread(server.connect(), "test.events@b")
    _wait_until(lambda: _waiters(server, "b") == 1)
    assert server.value("SELECT queue_unsubscribe('test.events', 'b')") == 1
    t.join(60)
    assert "subscription 'b' was dropped" in out.get("error", ""), out
