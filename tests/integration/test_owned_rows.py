"""INFORMATION_SCHEMA.QUEUE_OWNED_ROWS: which connection holds which row, how often it was
handed out, for how long, and how much of its lease is left."""
import time

import pymysql

from sqlcheck import query, value, wait_until

COLUMNS = ["TABLE_SCHEMA", "TABLE_NAME", "ROW_ID", "CONNECTION_ID", "DELIVERY_COUNT", "OWNED_MS",
           "ROW_AGE_MS", "LEASE_LEFT_MS", "SUBSCRIPTION_NAME"]


def _queue(server, n, table="q"):
    server.sql(f"CREATE TABLE test.{table} (v INT) ENGINE=QUEUE")
    server.sql(f"INSERT INTO test.{table} VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))


def _owned(server, columns="ROW_ID, CONNECTION_ID, DELIVERY_COUNT", conn=None):
    return server.sql(f"SELECT {columns} FROM information_schema.QUEUE_OWNED_ROWS "
                      "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='q' ORDER BY ROW_ID", conn=conn)


def test_columns(server):
    cols = [r[0] for r in server.sql(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA='information_schema' AND TABLE_NAME='QUEUE_OWNED_ROWS' ORDER BY ORDINAL_POSITION")]
    assert cols == COLUMNS


def test_each_owned_row_is_listed_with_its_connection_until_it_is_ended(server):
    _queue(server, 3)
    assert _owned(server) == []
    a, b = server.connect(), server.connect()
    assert query(a, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    assert query(b, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]
    a_id, b_id = value(a, "SELECT CONNECTION_ID()"), value(b, "SELECT CONNECTION_ID()")
    a_row, b_row = value(a, "SELECT queue_rowid()"), value(b, "SELECT queue_rowid()")
    assert _owned(server) == [(a_row, a_id, 1), (b_row, b_id, 1)]

    assert value(a, "SELECT queue_end()") == 1
    assert _owned(server) == [(b_row, b_id, 1)]
    b.close()  # a disconnect gives the row back
    wait_until(lambda: _owned(server) == [], what="b's row to go back")
    assert server.value("SELECT `ROWS` FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'") == 2


def test_delivery_count_and_ages(server):
    _queue(server, 1)
    time.sleep(0.2)  # the row is older than its ownership
    a = server.connect()
    for delivery in (1, 2):
        assert value(a, "SELECT queue_wait('test.q', 0)") == 1
        assert _owned(server, "DELIVERY_COUNT") == [(delivery,)]
        assert value(a, "SELECT queue_delivery_count()") == delivery
        if delivery == 1:
            assert value(a, "SELECT queue_abort()") == 1
    time.sleep(0.3)
    ((owned_ms, age_ms),) = _owned(server, "OWNED_MS, ROW_AGE_MS")
    assert 300 <= owned_ms < 30000
    assert age_ms >= owned_ms + 200


def test_lease_left_is_null_without_a_lease(server):
    _queue(server, 2)
    a, b = server.connect(), server.connect()
    query(a, "SET SESSION queue_lease_timeout = 30")
    assert value(a, "SELECT queue_wait('test.q', 0)") == 1
    assert value(b, "SELECT queue_wait('test.q', 0)") == 1
    (a_left,), (b_left,) = _owned(server, "LEASE_LEFT_MS")
    assert 15000 < a_left <= 30000
    assert b_left is None
    assert value(a, "SELECT queue_renew_lease(120)") == 1
    (a_left,), _ = _owned(server, "LEASE_LEFT_MS")
    assert 100000 < a_left <= 120000


def test_a_batch_lists_every_row(server):
    _queue(server, 5)
    a = server.connect()
    assert value(a, "SELECT queue_wait_batch('test.q', 3, 0)") == 3
    a_id = value(a, "SELECT CONNECTION_ID()")
    rows = _owned(server, "CONNECTION_ID")
    assert rows == [(a_id,)] * 3
    assert value(a, "SELECT queue_end()") == 1
    assert _owned(server) == []


def test_a_stuck_consumer_is_found_and_killed(server):
    """The operator's recipe: whoever has held a row for too long is killed, and the row
    goes straight to the next consumer."""
    _queue(server, 1)
    stuck = server.connect()
    assert value(stuck, "SELECT queue_wait('test.q', 0)") == 1
    time.sleep(0.2)
    (conn_id,) = server.sql("SELECT CONNECTION_ID FROM information_schema.QUEUE_OWNED_ROWS "
                            "WHERE TABLE_NAME='q' AND OWNED_MS > 100")[0]
    assert conn_id == value(stuck, "SELECT CONNECTION_ID()")
    server.sql(f"KILL {conn_id}")
    other = server.connect()
    assert query(other, "SELECT v FROM q WHERE queue_wait('q', 10)") == [(1,)]
    assert _owned(server, "CONNECTION_ID, DELIVERY_COUNT") == [(value(other, "SELECT CONNECTION_ID()"), 2)]


def test_a_user_sees_only_the_tables_they_may_select_from(server):
    _queue(server, 1)
    _queue(server, 1, table="secret")
    server.sql("CREATE USER watcher@localhost IDENTIFIED BY 'pw'")
    server.sql("GRANT SELECT ON test.q TO watcher@localhost")
    a = server.connect()
    assert value(a, "SELECT queue_wait('test.q', 'test.secret', 0)") == 1
    b = server.connect()
    assert value(b, "SELECT queue_wait('test.secret', 0)") == 1
    watcher = pymysql.connect(unix_socket=str(server.socket), user="watcher", password="pw",
                              connect_timeout=10, autocommit=True)
    try:
        for table in ("QUEUE_OWNED_ROWS", "QUEUE_TABLES"):
            names = query(watcher, f"SELECT DISTINCT TABLE_NAME FROM information_schema.{table}")
            assert names == [("q",)], (table, names)
    finally:
        watcher.close()
