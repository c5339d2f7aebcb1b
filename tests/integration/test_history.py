"""History (HISTORY_RETENTION=seconds, docs/sql-api.md "History"): a table keeps its ended rows
for the retention period, readable with SQL (queue_scan_history() in a WHERE; queue_scan_state()
'ended:<kind>', queue_scan_ended_at(), queue_scan_deliveries()), never handed out, counted apart
from queued rows, across restarts, kill -9 and compaction, on a replica too."""
import time

import pytest

from binlog_modes import both_binlog_modes
from replication_pair import Pair
from sqlcheck import expect_error, query, value, wait_until

ER_BAD_OPTION_VALUE = 1912

HISTORY = ("SELECT queue_scan_rowid(), v, queue_scan_state(), queue_scan_deliveries() FROM {t} "
           "WHERE queue_scan_history() ORDER BY 1")


def history(server_or_conn, table="test.q"):
    sql = HISTORY.format(t=table)
    if hasattr(server_or_conn, "sql"):
        return [tuple(r) for r in server_or_conn.sql(sql)]
    return [tuple(r) for r in query(server_or_conn, sql)]


def make_every_end(c):
    """Rows 1..8 of test.q ended every way a row ends (MAX_DELIVERIES=2), row 9 left queued.
    Returns the history expected: (row id, v, state, deliveries)."""
    query(c, "INSERT INTO q VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9)")
    assert value(c, "SELECT queue_wait('q:v=1', 0)") == 1
    assert value(c, "SELECT queue_abort()") == 1
    assert value(c, "SELECT queue_wait('q:v=1', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1                       # 1: consumed, 2nd delivery
    assert value(c, "SELECT queue_wait('q:v=2', 0)") == 1
    assert value(c, "SELECT queue_wait('q:v=3', 0)") == 1            # 2: ended by the next wait
    assert value(c, "SELECT queue_end()") == 1                       # 3
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q:v IN (4, 5)', 2, 0)") == [(4,), (5,)]
    assert value(c, "SELECT queue_end()") == 1                       # 4, 5: a batch
    query(c, "DELETE FROM q WHERE v = 6")                            # 6: deleted
    for _ in range(2):
        assert value(c, "SELECT queue_wait('q:v=7', 0)") == 1
        assert value(c, "SELECT queue_abort()") == 1                 # 7: dead after 2 deliveries
    assert value(c, "SELECT queue_purge_dead('q')") == 1             # 7: purged
    query(c, "BEGIN")
    assert value(c, "SELECT queue_wait('q:v=8', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    query(c, "COMMIT")                                               # 8: consumed in a transaction
    return [(1, 1, "ended:consumed", 2), (2, 2, "ended:consumed", 1), (3, 3, "ended:consumed", 1),
            (4, 4, "ended:consumed", 1), (5, 5, "ended:consumed", 1), (6, 6, "ended:deleted", 0),
            (7, 7, "ended:purged", 2), (8, 8, "ended:consumed", 1)]


@both_binlog_modes
def test_every_end_is_kept_with_its_kind_and_delivery_count_and_never_handed_out(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE HISTORY_RETENTION=3600 MAX_DELIVERIES=2")
    server.sql("CREATE TABLE test.qt (v INT) ENGINE=QUEUE HISTORY_RETENTION=3600 MESSAGE_TTL=1")
    c = server.connect()
    expected = make_every_end(c)
    assert history(c) == expected
    # The queue is what is left: row 9. History rows are not in a plain scan nor in COUNT(*).
    assert query(c, "SELECT queue_scan_rowid(), v, queue_scan_state() FROM q") == [(9, 9, "queued")]
    assert value(c, "SELECT COUNT(*) FROM q") == 1
    assert value(c, "SELECT COUNT(*) FROM q WHERE queue_scan_history()") == 8
    stats = server.queue_stats("test.q")
    assert (stats["rows"], stats["history_rows"]) == (1, 8)
    assert stats["history_bytes"] > 0
    assert query(c, "SELECT `ROWS`, HISTORY_ROWS, HISTORY_BYTES FROM INFORMATION_SCHEMA.QUEUE_TABLES "
                    "WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'q'") == [(1, 8, stats["history_bytes"])]
    # Never handed out: only row 9 is taken, then nothing.
    assert query(c, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(9,)]
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('q', 0)") == 0
    assert value(c, "SELECT queue_take_dead('q')") == 0
    # Searching by a column value, with the end time.
    ended_at = value(c, "SELECT queue_scan_ended_at() FROM q WHERE queue_scan_history() AND v = 6")
    assert abs(ended_at / 1000 - time.time()) < 600
    assert query(c, "SELECT queue_scan_state() FROM q WHERE v = 9 AND queue_scan_history()") == [("ended:consumed",)]
    # A history row cannot be deleted: it is not in the queue.
    query(c, "DELETE FROM q WHERE queue_scan_history()")
    assert value(c, "SELECT COUNT(*) FROM q WHERE queue_scan_history()") == 9
    # Expired (MESSAGE_TTL).
    query(c, "INSERT INTO qt VALUES (10)")
    wait_until(lambda: value(c, "SELECT COUNT(*) FROM qt") == 0, what="the row to expire")
    wait_until(lambda: history(c, "test.qt") == [(1, 10, "ended:expired", 0)], what="its history")


def test_a_table_without_the_option_keeps_no_history(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    query(c, "INSERT INTO q VALUES (1)")
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert history(c) == []
    assert server.queue_stats("test.q")["history_rows"] == 0


@both_binlog_modes
def test_the_history_survives_kill_9_a_restart_and_compaction(fresh_server):
    s = fresh_server
    s.restart()  # QUEUE loaded at startup: transactions with the binary log off too
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE HISTORY_RETENTION=3600 MAX_DELIVERIES=2")
    expected = make_every_end(s.connect())
    assert history(s) == expected
    s.kill9()
    s.start()
    assert history(s) == expected
    assert s.value("SELECT COUNT(*) FROM test.q") == 1
    s.sql("SELECT queue_compact('test.q')")
    assert history(s) == expected
    s.restart()  # clean
    assert history(s) == expected
    s.kill9()
    s.start()
    assert history(s) == expected
    assert s.queue_stats("test.q")["history_rows"] == 8
    assert s.sql("SELECT v FROM test.q WHERE queue_wait('test.q', 0)") == [(9,)]


def test_rows_are_gone_after_the_retention(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT, body MEDIUMTEXT) ENGINE=QUEUE HISTORY_RETENTION=1")
    c = s.connect()
    query(c, "INSERT INTO q VALUES (1, REPEAT('x', 100000))")
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT COUNT(*) FROM q WHERE queue_scan_history()") == 1
    size_with = s.queue_stats("test.q")["file_bytes"]
    wait_until(lambda: value(c, "SELECT COUNT(*) FROM q WHERE queue_scan_history()") == 0, what="the retention")
    assert s.queue_stats("test.q")["history_rows"] == 0
    query(c, "SELECT queue_compact('q')")
    assert s.queue_stats("test.q")["file_bytes"] < size_with - 100000  # compaction dropped it
    query(c, "ALTER TABLE q HISTORY_RETENTION=3600")  # in place: nothing comes back
    s.kill9()
    s.start()
    assert history(s) == []


def test_the_option_changes_in_place_and_bad_values_are_refused(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    query(c, "INSERT INTO q VALUES (1), (2)")
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    query(c, "ALTER TABLE q HISTORY_RETENTION=3600, ALGORITHM=INPLACE")
    assert value(c, "SELECT queue_wait('q', 0)") == 1  # ends row 1 (owned across the ALTER)
    assert value(c, "SELECT queue_end()") == 1
    assert history(c) == [(1, 1, "ended:consumed", 1), (2, 2, "ended:consumed", 1)]
    query(c, "ALTER TABLE q HISTORY_RETENTION=0")  # off: forgotten
    assert history(c) == []
    for bad in ("'abc'", "'1 day'", "'-1'", "31536001"):
        expect_error(c, f"CREATE TABLE q2 (v INT) ENGINE=QUEUE HISTORY_RETENTION={bad}", "HISTORY_RETENTION")
    expect_error(c, "ALTER TABLE q HISTORY_RETENTION='x'", "HISTORY_RETENTION")


def test_a_replica_holds_the_same_history(server_factory):
    pair = Pair(server_factory)
    try:
        pair.primary.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE HISTORY_RETENTION=3600 MAX_DELIVERIES=2")
        expected = make_every_end(pair.primary.connect())
        pair.sync()
        assert history(pair.primary) == expected
        assert history(pair.replica) == expected
        pair.replica.restart(kill=True)
        pair.replica.sql("START SLAVE")
        assert history(pair.replica) == expected
    finally:
        pair.destroy()


def test_a_prepared_statement_reads_the_history_at_every_execution(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE HISTORY_RETENTION=3600")
    c = server.connect()
    query(c, "INSERT INTO q VALUES (1), (2), (3)")
    query(c, "PREPARE s FROM 'SELECT v, queue_scan_state() FROM q WHERE queue_scan_history() AND v >= ?'")
    query(c, "SET @v = 1")
    assert query(c, "EXECUTE s USING @v") == []
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert query(c, "EXECUTE s USING @v") == [(1, "ended:consumed"), (2, "ended:consumed")]
    query(c, "SET @v = 2")
    assert query(c, "EXECUTE s USING @v") == [(2, "ended:consumed")]
    assert query(c, "SELECT v FROM q") == [(3,)]  # a plain scan after it reads the queue again
