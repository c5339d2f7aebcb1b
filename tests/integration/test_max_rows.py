"""MAX_ROWS: a bounded queue. The server's own table option, which a MEMORY table also obeys:
an INSERT that would take the table past MAX_ROWS rows fails with error 1114 ("table is full")
and adds none of its rows, so producers feel back-pressure instead of the queue growing
without bound (Redis Streams' MAXLEN trims old entries instead: here nothing queued is ever
dropped). Queued, owned, delayed and dead rows all count. ALTER TABLE changes the limit in
place; the limit is part of the table definition, so it holds after a restart or kill -9."""
import threading

import pymysql

from sqlcheck import Background, expect_error, query, value

import pytest

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes

ER_RECORD_FILE_FULL = 1114


def _stats(server, table="test.q"):
    return server.queue_stats(table)


def _consume(c, n, table="q"):
    got = []
    for _ in range(n):
        rows = query(c, f"SELECT v FROM {table} WHERE queue_wait('{table}', 0)")
        assert rows, "the queue ran dry"
        got.append(rows[0][0])
    assert value(c, "SELECT queue_end()") == 1
    return got


def test_an_insert_past_max_rows_fails_whole_naming_the_table_and_the_limit(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MAX_ROWS=3")
    assert "MAX_ROWS=3" in server.sql("SHOW CREATE TABLE test.q")[0][1]
    c = server.connect()
    query(c, "INSERT INTO q VALUES (1), (2)")
    errno, msg = expect_error(c, "INSERT INTO q VALUES (3), (4)", "QUEUE table 'test.q' is full",
                              "it holds 2 rows and its limit is 3 (MAX_ROWS)", "2 rows do not fit",
                              "none of them was added", "raise MAX_ROWS with ALTER TABLE",
                              code=ER_RECORD_FILE_FULL)
    assert value(c, "SELECT COUNT(*) FROM q") == 2  # neither row of the refused INSERT
    query(c, "INSERT INTO q VALUES (3)")  # exactly at the limit
    expect_error(c, "INSERT INTO q VALUES (4)", "1 row does not fit", code=ER_RECORD_FILE_FULL)
    assert query(c, "SELECT v FROM q") == [(1,), (2,), (3,)]

    # A row being worked on still counts; consuming it makes room.
    assert query(c, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    expect_error(c, "INSERT INTO q VALUES (4)", code=ER_RECORD_FILE_FULL)
    assert value(c, "SELECT queue_end()") == 1
    query(c, "INSERT INTO q VALUES (4)")
    assert query(c, "SELECT v FROM q") == [(2,), (3,), (4,)]

    stats = _stats(server)
    assert (stats["max_rows"], stats["rows_refused"], stats["rows"]) == (3, 4, 3)
    assert server.value("SELECT MAX_ROWS FROM information_schema.QUEUE_TABLES "
                        "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='q'") == 3
    # Producers that do not handle the error themselves see the same number as for a full
    # MEMORY table, with the text naming this table.
    server.sql("CREATE TABLE test.m (v INT) ENGINE=MEMORY MAX_ROWS=1")
    server.sql("INSERT INTO test.m VALUES (1)")
    assert expect_error(c, "INSERT INTO test.m SELECT seq FROM seq_1_to_100000",
                        code=ER_RECORD_FILE_FULL)[0] == errno


def test_a_table_without_max_rows_has_no_limit(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q SELECT seq FROM seq_1_to_5000")
    assert server.value("SELECT COUNT(*) FROM test.q") == 5000
    assert _stats(server)["max_rows"] == 0
    server.sql("ALTER TABLE test.q MAX_ROWS=0")
    server.sql("INSERT INTO test.q VALUES (1)")


def test_alter_changes_the_limit_in_place_and_keeps_every_row(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MAX_ROWS=10")
    c = server.connect()
    query(c, "INSERT INTO q SELECT seq FROM seq_1_to_6")
    assert query(c, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]  # owned across the ALTER
    # In place (no copy): the owned row stays owned, nothing is rewritten.
    server.sql("ALTER TABLE test.q MAX_ROWS=4, ALGORITHM=INPLACE")
    assert server.value("SELECT COUNT(*) FROM test.q") == 5  # all 6 stay; the owned one is c's
    assert _stats(server)["max_rows"] == 4
    expect_error(c, "INSERT INTO q VALUES (7)", "it holds 6 rows and its limit is 4", code=ER_RECORD_FILE_FULL)
    assert value(c, "SELECT queue_end()") == 1
    # A copying ALTER moves every row, past the limit too, and the limit holds afterwards.
    server.sql("ALTER TABLE test.q ADD COLUMN w INT DEFAULT 0")
    assert [r[0] for r in server.sql("SELECT v FROM test.q")] == [2, 3, 4, 5, 6]
    expect_error(c, "INSERT INTO q (v) VALUES (7)", "holds 5 rows and its limit is 4", code=ER_RECORD_FILE_FULL)
    assert _consume(c, 2) == [2, 3]
    query(c, "INSERT INTO q (v) VALUES (7)")
    server.sql("ALTER TABLE test.q MAX_ROWS=100")
    query(c, "INSERT INTO q (v) SELECT seq FROM seq_8_to_20")
    assert server.value("SELECT COUNT(*) FROM test.q") == 17


def test_create_select_into_a_smaller_table_fails(server):
    server.sql("CREATE TABLE test.src (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.src SELECT seq FROM seq_1_to_5")
    c = server.connect()
    expect_error(c, "CREATE TABLE test.q ENGINE=QUEUE MAX_ROWS=3 AS SELECT * FROM test.src",
                 "QUEUE table 'test.q' is full", "5 rows do not fit", code=ER_RECORD_FILE_FULL)
    assert value(c, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='test' "
                    "AND TABLE_NAME='q'") == 0
    query(c, "CREATE TABLE test.q ENGINE=QUEUE MAX_ROWS=5 AS SELECT * FROM test.src")
    assert value(c, "SELECT COUNT(*) FROM test.q") == 5


def test_the_limit_holds_after_kill9(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MAX_ROWS=3")
    s.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    s.restart(kill=True)
    c = s.connect()
    # The first statement after the restart that opens the table is the refused INSERT.
    expect_error(c, "INSERT INTO q VALUES (4)", "is full", code=ER_RECORD_FILE_FULL)
    assert query(c, "SELECT v FROM q") == [(1,), (2,), (3,)]
    assert _consume(c, 1) == [1]
    query(c, "INSERT INTO q VALUES (4)")
    s.restart(kill=True)
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == [2, 3, 4]


def test_concurrent_producers_never_take_the_table_past_the_limit(server):
    """Eight producers with two-row INSERTs against one consumer: every INSERT either lands
    whole or fails with 1114, the table never holds more than MAX_ROWS, and every accepted
    row is consumed exactly once."""
    limit = 50
    server.sql(f"CREATE TABLE test.q (p INT, i INT, half INT) ENGINE=QUEUE MAX_ROWS={limit}")
    accepted, refused, errors = [], [], []
    lock = threading.Lock()
    producers_done = threading.Event()

    def produce(p):
        c = server.connect()
        for i in range(150):
            try:
                query(c, f"INSERT INTO q VALUES ({p}, {i}, 0), ({p}, {i}, 1)")
                with lock:
                    accepted.append((p, i))
            except pymysql.MySQLError as e:
                with lock:
                    (refused if e.args[0] == ER_RECORD_FILE_FULL else errors).append((p, i, e.args))

    consumed = []
    peak = [0]

    def consume():
        c = server.connect()
        while True:
            rows = query(c, "SELECT p, i, half FROM q WHERE queue_wait('q', 0)")
            if rows:
                consumed.append(rows[0])
            elif producers_done.is_set():
                break
            peak[0] = max(peak[0], value(c, "SELECT `ROWS` FROM information_schema.QUEUE_TABLES "
                                            "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='q'"))
        # (the last, empty queue_wait() ended the last row)

    consumer = Background(consume)
    producers = [Background(produce, p) for p in range(8)]
    for t in producers:
        t.join()
    producers_done.set()
    consumer.join()
    assert not errors, errors[:3]
    assert len(accepted) + len(refused) == 8 * 150
    assert refused, "the limit was never reached"
    assert peak[0] <= limit
    # Every accepted INSERT arrived whole, exactly once; no refused one left a row.
    want = sorted((p, i, h) for p, i in accepted for h in (0, 1))
    assert sorted(consumed) == want
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    assert _stats(server)["rows_refused"] == 2 * len(refused)


def test_a_table_with_triggers_takes_a_multi_row_insert_whole_or_not_at_all(server, binlog):
    """The server gives a table with triggers no bulk insert, but the rows of a multi-row INSERT
    still commit together (one write path, issue 42): none of them if one does not fit, with the
    binary log on or off. (Before, with it off, each row committed alone and the rows before the
    refused one stayed.)"""
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MAX_ROWS=2")
    server.sql("CREATE TABLE test.audit (v INT) ENGINE=InnoDB")
    server.sql("CREATE TRIGGER test.q_audit AFTER INSERT ON test.q FOR EACH ROW INSERT INTO test.audit VALUES (NEW.v)")
    c = server.connect()
    expect_error(c, "INSERT INTO q VALUES (1), (2), (3)", "holds 0 rows and its limit is 2", "3 rows do not fit",
                 code=ER_RECORD_FILE_FULL)
    assert query(c, "SELECT v FROM q") == []
    assert query(c, "SELECT v FROM audit") == []
    query(c, "INSERT INTO q VALUES (1), (2)")
    assert query(c, "SELECT v FROM q") == [(1,), (2,)]
    assert query(c, "SELECT v FROM audit") == [(1,), (2,)]
