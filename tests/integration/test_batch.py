"""Batch consume: queue_wait_batch(tbl, max_rows [, timeout]) owns up to max_rows rows at once;
queue_end() removes them all, queue_abort() and a disconnect return them all."""
import json
import threading
import time

from sqlcheck import expect_error, query, value, wait_until

ER_WRONG_ARGUMENTS = 1210
ER_WRONG_PARAMCOUNT = 1582
ER_LOCK_WAIT_TIMEOUT = 1205


def _queue(server, n=0, name="q"):
    server.sql(f"CREATE TABLE test.{name} (v INT, s VARCHAR(20)) ENGINE=QUEUE")
    if n:
        server.sql(f"INSERT INTO test.{name} VALUES " + ", ".join(f"({i}, 's{i}')" for i in range(1, n + 1)))


def test_a_batch_is_owned_as_a_whole_and_ended_in_one_statement(server):
    _queue(server, n=10)
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait_batch('test.q', 4, 0)") == 4
    assert query(a, "SELECT v FROM q") == [(1,), (2,), (3,), (4,)]
    assert value(a, "SELECT COUNT(*) FROM q") == 4
    assert query(b, "SELECT v FROM q") == [(v,) for v in range(5, 11)]  # nobody else sees them
    info = query(server.connect(), "SELECT `ROWS`, OWNED_ROWS FROM information_schema.QUEUE_TABLES "
                                   "WHERE TABLE_NAME = 'q'")
    assert info == [(10, 4)]
    assert value(a, "SELECT queue_end()") == 1
    assert value(a, "SELECT queue_rowid()") is None
    assert query(a, "SELECT v FROM q") == [(v,) for v in range(5, 11)]


def test_one_statement_batches_each_ack_the_previous_one(server):
    _queue(server, n=7)
    c = server.connect()
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q', 3, 0)") == [(1,), (2,), (3,)]
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q', 3, 0)") == [(4,), (5,), (6,)]
    assert server.value("SELECT COUNT(*) FROM test.q") == 1  # 1-3 removed, 4-6 owned: 7 is free
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q', 3, 0)") == [(7,)]  # what is free now
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q', 3, 0)") == []  # acked 7, timed out
    assert value(c, "SELECT queue_rowid()") is None
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    # queue_wait() after a batch consumes the whole batch as well
    _queue(server, n=3, name="q2")
    assert value(c, "SELECT queue_wait_batch('q2', 2, 0)") == 2
    assert value(c, "SELECT queue_wait('q2', 0)") == 1
    assert query(c, "SELECT v FROM q2") == [(3,)]
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q2") == 0


def test_rowid_and_delivery_count_answer_for_each_row_read(server):
    _queue(server, n=5)
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait_batch('q', 2, 0)") == 2
    assert value(a, "SELECT queue_abort()") == 1
    assert value(b, "SELECT queue_wait_batch('q', 5, 0)") == 5
    rows = query(b, "SELECT queue_rowid(), queue_delivery_count(), v FROM q")
    assert [r[2] for r in rows] == [1, 2, 3, 4, 5]
    assert [r[1] for r in rows] == [2, 2, 1, 1, 1]  # rows 1 and 2 were handed to a before
    ids = [r[0] for r in rows]
    assert ids == sorted(set(ids))  # one id per row, ascending
    # a sort evaluates them after reading every row, when the row they belong to is unknown:
    # NULL, never another row's value
    by_v_desc = query(b, "SELECT queue_rowid(), queue_delivery_count(), v FROM q ORDER BY v DESC")
    assert by_v_desc == [(None, None, v) for v in (5, 4, 3, 2, 1)]
    # outside a scan of the table: the lowest row's
    assert value(b, "SELECT queue_rowid()") == ids[0]
    assert value(b, "SELECT queue_delivery_count()") == 2
    # dead-lettering a batch: the rows seen more than once
    server.sql("CREATE TABLE test.dead (v INT, deliveries INT) ENGINE=InnoDB")
    query(b, "INSERT INTO test.dead SELECT v, queue_delivery_count() FROM q WHERE queue_delivery_count() > 1")
    assert server.sql("SELECT v, deliveries FROM test.dead ORDER BY v") == [(1, 2), (2, 2)]


def test_delete_removes_single_rows_of_a_batch(server):
    _queue(server, n=5)
    c = server.connect()
    assert value(c, "SELECT queue_wait_batch('q', 3, 0)") == 3
    query(c, "DELETE FROM q WHERE v = 2")  # ack one row now
    assert query(c, "SELECT v FROM q") == [(1,), (3,)]
    query(c, "DELETE FROM q WHERE v = 5")  # not in its batch: invisible, untouched
    assert value(c, "SELECT queue_end()") == 1
    assert server.sql("SELECT v FROM test.q") == [(4,), (5,)]


def test_a_condition_selects_the_batch(server):
    _queue(server, n=12)
    c = server.connect()
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q:v % 3 = 0', 10, 0)") == [(3,), (6,), (9,), (12,)]
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q") == 8


def test_abort_and_disconnect_return_every_row(server):
    _queue(server, n=6)
    a = server.connect()
    assert value(a, "SELECT queue_wait_batch('q', 6, 0)") == 6
    assert value(a, "SELECT queue_abort()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q") == 6
    b = server.connect()
    assert value(b, "SELECT queue_wait_batch('q', 4, 0)") == 4
    b.close()
    c = server.connect()
    wait_until(lambda: value(c, "SELECT COUNT(*) FROM q") == 6, what="the closed connection's rows back")
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q', 100, 0)") == [(v,) for v in range(1, 7)]


def test_a_batch_waits_for_its_first_row_only(server):
    _queue(server)
    c = server.connect()
    started = time.monotonic()
    assert value(c, "SELECT queue_wait_batch('q', 5, 0.2)") == 0  # timeout
    assert time.monotonic() - started >= 0.2
    p = server.connect()

    def produce():
        time.sleep(0.2)
        query(p, "INSERT INTO q VALUES (1, 'late')")

    t = threading.Thread(target=produce)
    t.start()
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q', 5, 30)") == [(1,)]  # does not wait to fill up
    t.join()


def test_an_expired_lease_returns_the_whole_batch(server):
    _queue(server, n=3)
    a, b = server.connect(), server.connect()
    query(a, "SET SESSION queue_lease_timeout = 0.2")
    assert value(a, "SELECT queue_wait_batch('q', 3, 0)") == 3
    assert query(b, "SELECT v FROM q WHERE queue_wait_batch('q', 10, 30)") == [(1,), (2,), (3,)]
    expect_error(a, "SELECT queue_end()", "queue_end(): lease expired: table 'test.q'", "batch of 3 rows",
                 "were not removed", code=ER_LOCK_WAIT_TIMEOUT)
    assert value(a, "SELECT queue_rowid()") is None  # out of owner mode
    assert json.loads(server.value("SELECT queue_stats('test.q')"))["lease_expiries"] == 3
    # a heartbeat keeps the whole batch
    assert value(b, "SELECT queue_abort()") == 1
    query(a, "SET SESSION queue_lease_timeout = 0.3")
    assert value(a, "SELECT queue_wait_batch('q', 3, 0)") == 3
    assert value(a, "SELECT queue_renew_lease(30)") == 1
    time.sleep(0.6)
    assert value(a, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_bad_arguments_get_clear_errors(server):
    _queue(server, n=1)
    c = server.connect()
    for sql in ("SELECT queue_wait_batch('q')", "SELECT queue_wait_batch('q', 1, 1, 1)",
                "SELECT queue_wait_batch()"):
        expect_error(c, sql, "queue_wait_batch() takes 2 or 3 arguments (table, max_rows [, timeout])",
                     code=ER_WRONG_PARAMCOUNT)
    for bad in ("0", "-1", "2.5", "'many'", "NULL", "10001"):
        expect_error(c, f"SELECT queue_wait_batch('q', {bad}, 0)", "queue_wait_batch(): argument 2: invalid max_rows",
                     "expected a whole number from 1 to 10000", code=ER_WRONG_ARGUMENTS)
    expect_error(c, "SELECT queue_wait_batch(5, 1, 0)", "queue_wait_batch(): argument 1: 5 is a number",
                 code=ER_WRONG_ARGUMENTS)
    expect_error(c, "SELECT queue_wait_batch('q', 1, -1)", "queue_wait_batch(): argument 3: invalid timeout -1",
                 code=ER_WRONG_ARGUMENTS)
    expect_error(c, "SELECT queue_wait_batch('nosuch', 1, 0)", "queue_wait_batch()", "argument 1", "nosuch")
    expect_error(c, "SELECT queue_wait_batch('q:nosuch > 1', 1, 0)", "queue_wait_batch()", "unknown column 'nosuch'")
    # a string that reads as a number is one (clients that bind every parameter as a string)
    assert value(c, "SELECT queue_wait_batch('q', '1', '0')") == 1
    assert value(c, "SELECT queue_end()") == 1


def test_prepared_with_parameters(server):
    _queue(server, n=5)
    c = server.connect()
    query(c, "PREPARE take FROM 'SELECT v FROM q WHERE queue_wait_batch(?, ?, ?)'")
    query(c, "SET @t = 'q', @n = 2, @w = 0")
    assert query(c, "EXECUTE take USING @t, @n, @w") == [(1,), (2,)]
    assert query(c, "EXECUTE take USING @t, @n, @w") == [(3,), (4,)]  # acked 1 and 2
    query(c, "SET @n = 0")
    expect_error(c, "EXECUTE take USING @t, @n, @w", "argument 2: invalid max_rows 0", code=ER_WRONG_ARGUMENTS)
    assert server.value("SELECT COUNT(*) FROM test.q") == 1  # the failed call removed nothing: 3, 4 still owned
