"""Blocking queue_wait: wake-ups, timeouts, KILL QUERY, and DDL while rows are owned or waited on.
Timing assertions are deliberately loose: they only tell "woken" from "timed out"."""
import socket
import time

import pymysql
import pytest
from pymysql.constants import COMMAND

from sqlcheck import (ER_QUERY_INTERRUPTED, WAITING_FOR_ROW, Background, query, start_waiter, value, wait_for_waiter,
                      wait_until)

LONG = 60  # a waiter that is woken must return well before this


def _queue(server, name="q", n=0):
    server.sql(f"CREATE TABLE test.{name} (v INT) ENGINE=QUEUE")
    if n:
        server.sql(f"INSERT INTO test.{name} VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))


def test_insert_wakes_a_waiter(server):
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('q', {LONG})")
    server.sql("INSERT INTO test.q VALUES (42)")
    assert bg.join() == 1
    assert bg.elapsed < LONG / 2
    assert query(c, "SELECT v FROM q") == [(42,)]


def test_a_waiting_consumer_shows_its_state_in_the_processlist(server):
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('q', {LONG})")

    def state():
        return server.value("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID=%s", (c.thread_id(),))
    assert state() == WAITING_FOR_ROW  # start_waiter waited for it
    server.sql("INSERT INTO test.q VALUES (1)")
    assert bg.join() == 1
    assert state() != WAITING_FOR_ROW


def test_insert_into_second_table_wakes_a_multi_table_waiter(server):
    _queue(server, "q1")
    _queue(server, "q2")
    c, bg = start_waiter(server, f"SELECT queue_wait('q1', 'q2', {LONG})")
    server.sql("INSERT INTO test.q2 VALUES (7)")
    assert bg.join() == 2
    assert bg.elapsed < LONG / 2
    assert query(c, "SELECT v FROM q2") == [(7,)]


def test_one_wake_up_with_rows_of_several_listed_tables_takes_the_first_listed(server):
    """Tables and conditions in one list: one INSERT brings rows for levels 2 and 4; the
    blocked waiter takes level 2's, after looking at the empty level 1 (another table)."""
    _queue(server, "q1")
    server.sql("CREATE TABLE test.pq (id INT NOT NULL, prio TINYINT NOT NULL) ENGINE=QUEUE")
    _queue(server, "q3")
    wait = "SELECT queue_wait('q1', 'pq:prio=0', 'q3', 'pq:prio=1', {})"
    c, bg = start_waiter(server, wait.format(LONG))
    server.sql("INSERT INTO test.pq VALUES (1,1),(2,0)")
    assert bg.join() == 2
    assert query(c, "SELECT id FROM pq") == [(2,)]
    server.sql("INSERT INTO test.q3 VALUES (3)")
    assert value(c, wait.format(0)) == 3  # the level-4 row waits behind level 3
    assert value(c, wait.format(0)) == 4
    assert query(c, "SELECT id, queue_delivery_count() FROM pq") == [(1, 1)]  # never handed out before


def test_each_insert_wakes_exactly_one_waiter(server):
    _queue(server)
    waiters = [start_waiter(server, f"SELECT queue_wait('q', {LONG})") for _ in range(3)]
    server.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    got = []
    for c, bg in waiters:
        assert bg.join() == 1
        got.append(value(c, "SELECT v FROM q"))
    assert sorted(got) == [1, 2, 3]


def test_fractional_timeout(server):
    _queue(server)
    c = server.connect()
    t0 = time.monotonic()
    assert value(c, "SELECT queue_wait('q', 0.2)") == 0
    elapsed = time.monotonic() - t0
    assert 0.15 <= elapsed < 10, elapsed


def test_one_second_timeout_returns_zero(server):
    _queue(server)
    t0 = time.monotonic()
    assert server.value("SELECT queue_wait('q', 1)") == 0
    assert 0.9 <= time.monotonic() - t0 < 20


def test_kill_query_interrupts_a_wait(server):
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('q', {LONG})")
    server.sql(f"KILL QUERY {c.thread_id()}")
    with pytest.raises(pymysql.MySQLError) as e:
        bg.join()
    assert e.value.args[0] == ER_QUERY_INTERRUPTED, e.value.args
    assert bg.elapsed < LONG / 2
    # the connection is still usable and not in owner mode
    assert value(c, "SELECT queue_rowid()") is None
    server.sql("INSERT INTO test.q VALUES (1)")
    assert value(c, "SELECT queue_wait('q', 0)") == 1


def test_kill_connection_of_a_waiter(server):
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('q', {LONG})")
    server.sql(f"KILL {c.thread_id()}")
    with pytest.raises(pymysql.MySQLError):
        bg.join()
    assert bg.elapsed < LONG / 2
    # the killed waiter must not have swallowed a later row
    server.sql("INSERT INTO test.q VALUES (1)")
    assert server.value("SELECT queue_wait('q', 30)") == 1


def test_abandoned_waiter_does_not_keep_a_row(server):
    _queue(server)
    c = server.connect()
    c._execute_command(COMMAND.COM_QUERY, f"SELECT queue_wait('q', {LONG})")  # never read
    wait_for_waiter(server, c.thread_id())
    # the client vanishes (shutdown: pymysql's file object keeps the fd open past close())
    c._sock.shutdown(socket.SHUT_RDWR)
    server.sql("INSERT INTO test.q VALUES (1)")
    assert server.value("SELECT queue_wait('q', 30)") == 1
    assert server.sql("SELECT v FROM test.q") == [(1,)]


def test_drop_table_while_a_row_is_owned(server):
    _queue(server, n=2)
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    server.sql("DROP TABLE test.q")
    try:
        value(owner, "SELECT queue_end()")
    except pymysql.MySQLError:
        pass  # either result is acceptable; crashing or hanging is not
    assert server.value("SELECT 1") == 1
    _queue(server)
    assert value(owner, "SELECT queue_wait('q', 0)") == 0
    server.sql("INSERT INTO test.q VALUES (5)")
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    assert query(owner, "SELECT v FROM q") == [(5,)]


def test_drop_table_while_a_consumer_waits(server):
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('test.q', {LONG})")
    server.sql("DROP TABLE test.q")
    with pytest.raises(pymysql.MySQLError) as e:
        bg.join()
    assert "test.q" in str(e.value.args), e.value.args
    assert bg.elapsed < LONG / 2
    assert value(c, "SELECT 1") == 1


def test_truncate_while_a_row_is_owned(server):
    _queue(server, n=3)
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    server.sql("TRUNCATE TABLE test.q")
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    assert value(owner, "SELECT queue_end()") == 1  # just leaves owner mode
    assert value(owner, "SELECT queue_rowid()") is None
    assert value(owner, "SELECT COUNT(*) FROM q") == 0
    server.sql("INSERT INTO test.q VALUES (9)")
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    assert query(owner, "SELECT v FROM q") == [(9,)]


def test_truncate_while_a_consumer_waits(server):
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('q', {LONG})")
    server.sql("TRUNCATE TABLE test.q")
    time.sleep(0.2)
    assert not bg.done(), "the wait must survive TRUNCATE"
    server.sql("INSERT INTO test.q VALUES (3)")
    assert bg.join() == 1
    assert query(c, "SELECT v FROM q") == [(3,)]


def test_rename_while_a_consumer_waits(server):
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('test.q', {LONG})")
    server.sql("RENAME TABLE test.q TO test.q_renamed")
    time.sleep(0.2)
    assert not bg.done(), "the wait must survive RENAME"
    # whether the wait follows the table or its old name, one of these rows wakes it
    server.sql("INSERT INTO test.q_renamed VALUES (1)")
    _queue(server)
    server.sql("INSERT INTO test.q VALUES (2)")
    assert bg.join() == 1
    assert bg.elapsed < LONG / 2


def test_alter_while_a_row_is_owned_loses_nothing(server):
    _queue(server, n=2)
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    server.sql("ALTER TABLE test.q ADD COLUMN w INT DEFAULT 0")
    assert server.value("SELECT 1") == 1
    owner.close()  # whatever ALTER did to the ownership, the row must still exist afterwards
    wait_until(lambda: server.value("SELECT COUNT(*) FROM test.q") == 2, what="both rows visible")
    assert server.sql("SELECT v, w FROM test.q") == [(1, 0), (2, 0)]


def test_alter_with_sparse_ids_keeps_an_owned_row_between_visible_ones(server):
    _queue(server, n=300)
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(b, "SELECT queue_wait('q', 0)") == 1  # owns v=2
    assert value(a, "SELECT queue_abort()") == 1  # v=1 visible again
    server.sql("DELETE FROM test.q WHERE v BETWEEN 3 AND 298")  # a wide id gap after the owned row
    server.sql("ALTER TABLE test.q ADD COLUMN w INT DEFAULT 0")
    a.close()
    b.close()
    wait_until(lambda: server.value("SELECT COUNT(*) FROM test.q") == 4, what="all rows visible")
    assert sorted(server.sql("SELECT v FROM test.q")) == [(1,), (2,), (299,), (300,)]


DDL_WHILE_A_STATEMENT_WAITS = [
    "ALTER TABLE test.q MESSAGE_TTL=60",      # in place
    "ALTER TABLE test.q ADD COLUMN w INT",    # copies the rows
    "TRUNCATE TABLE test.q",
    "RENAME TABLE test.q TO test.q_renamed",
    "DROP TABLE test.q",
    "FLUSH TABLES test.q",
]


@pytest.mark.parametrize("consume", ["SELECT * FROM q WHERE queue_wait('q', {t})",
                                     "SELECT * FROM q WHERE queue_wait_batch('q', 10, {t})"],
                         ids=["queue_wait", "queue_wait_batch"])
@pytest.mark.parametrize("ddl", DDL_WHILE_A_STATEMENT_WAITS)
def test_ddl_does_not_wait_for_a_consumer_statement_that_waits(server, ddl, consume):
    """The consume statement opens `q` and holds its metadata lock while it waits. DDL that
    needs the table makes the wait end early with no row (about 250 ms), instead of waiting
    for the consumer's timeout with every later statement on the table queued behind it."""
    _queue(server, n=0)
    yields_before = int(dict((r[1], r[2]) for r in server.sql("SHOW ENGINE QUEUE STATUS"))["wait_yields"])
    c = server.connect()
    bg = Background(lambda: query(c, consume.format(t=LONG)))
    wait_until(lambda: server.value("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID=%s",
                                    (c.thread_id(),)) == WAITING_FOR_ROW, what="the consumer to sleep")
    started = time.monotonic()
    server.sql(ddl)
    assert time.monotonic() - started < LONG / 2
    assert bg.join() == []  # no row: like a timeout
    assert bg.elapsed < LONG / 2
    yields = int(dict((r[1], r[2]) for r in server.sql("SHOW ENGINE QUEUE STATUS"))["wait_yields"])
    assert yields == yields_before + 1
    assert value(c, "SELECT queue_rowid()") is None  # not in owner mode


def test_a_waiting_function_call_holds_no_metadata_lock_and_does_not_yield(server):
    """`SELECT queue_wait('q', t)` does not open `q` as a table: DDL never waits for it, and
    the wait goes on (or ends with the table, for DROP)."""
    _queue(server)
    c, bg = start_waiter(server, f"SELECT queue_wait('q', {LONG})")
    server.sql("ALTER TABLE test.q MESSAGE_TTL=60")
    time.sleep(0.6)  # over two yield checks
    assert not bg.done()
    server.sql("INSERT INTO test.q VALUES (1)")
    assert bg.join() == 1
