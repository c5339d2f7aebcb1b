"""LOCK TABLES on a queue table. The engine takes no table-level THR_LOCK (like InnoDB);
metadata locks must still give LOCK TABLES its meaning for other connections."""
from sqlcheck import Background, expect_error, query, value, wait_for_waiter

ER_LOCK_WAIT_TIMEOUT = 1205


def _queue(server, n=0):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    if n:
        server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))


def _short_lock_wait(server):
    c = server.connect()
    query(c, "SET SESSION lock_wait_timeout = 1")
    return c


def test_lock_tables_write_keeps_other_connections_out(server):
    _queue(server, 2)
    locker = server.connect()
    query(locker, "LOCK TABLES test.q WRITE")
    query(locker, "INSERT INTO test.q VALUES (3)")
    other = _short_lock_wait(server)
    expect_error(other, "INSERT INTO test.q VALUES (9)", code=ER_LOCK_WAIT_TIMEOUT)
    expect_error(other, "SELECT COUNT(*) FROM test.q", code=ER_LOCK_WAIT_TIMEOUT)
    expect_error(other, "SELECT * FROM test.q WHERE queue_wait('test.q', 0)", code=ER_LOCK_WAIT_TIMEOUT)
    assert value(locker, "SELECT COUNT(*) FROM test.q") == 3
    query(locker, "UNLOCK TABLES")
    query(other, "INSERT INTO test.q VALUES (9)")
    assert server.sql("SELECT v FROM test.q") == [(1,), (2,), (3,), (9,)]


def test_lock_tables_read_blocks_writers_not_readers(server):
    _queue(server, 2)
    locker = server.connect()
    query(locker, "LOCK TABLES test.q READ")
    other = _short_lock_wait(server)
    assert value(other, "SELECT COUNT(*) FROM test.q") == 2
    expect_error(other, "INSERT INTO test.q VALUES (9)", code=ER_LOCK_WAIT_TIMEOUT)
    expect_error(locker, "INSERT INTO test.q VALUES (9)", "READ lock")
    query(locker, "UNLOCK TABLES")
    query(other, "INSERT INTO test.q VALUES (9)")
    assert value(other, "SELECT COUNT(*) FROM test.q") == 3


def test_an_insert_waiting_for_lock_tables_runs_after_unlock(server):
    _queue(server)
    locker = server.connect()
    query(locker, "LOCK TABLES test.q WRITE")
    writer = server.connect()
    bg = Background(lambda: query(writer, "INSERT INTO test.q VALUES (7)"))
    wait_for_waiter(server, writer.thread_id())
    assert not bg.done()
    assert value(locker, "SELECT COUNT(*) FROM test.q") == 0
    query(locker, "UNLOCK TABLES")
    bg.join()
    assert server.sql("SELECT v FROM test.q") == [(7,)]


def test_consume_under_lock_tables(server):
    _queue(server, 2)
    c = server.connect()
    query(c, "LOCK TABLES test.q WRITE")
    assert query(c, "SELECT * FROM test.q WHERE queue_wait('test.q', 0)") == [(1,)]
    assert query(c, "SELECT * FROM test.q WHERE queue_wait('test.q', 0)") == [(2,)]
    assert value(c, "SELECT queue_end()") == 1
    query(c, "UNLOCK TABLES")
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
