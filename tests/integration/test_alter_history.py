"""A copying ALTER TABLE (one that changes columns) moves a queue's rows into a new table.
Each row keeps what it has been through: its age (MESSAGE_TTL counts from its INSERT), its
delivery count (a dead row stays dead, a retried row keeps its retries) and a pending retry
delay (queue_abort(seconds)). Before, every row started over, and dead rows were handed out
again."""
import json
import time

from sqlcheck import query, value

TABLE_STATE = ("SELECT `ROWS`, DEAD_ROWS, DELAYED_ROWS, OLDEST_AGE_MS FROM information_schema.QUEUE_TABLES "
               "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='jobs'")


def _fail(server, expect_id, delay=None):
    """A worker takes the next row (expect_id) and gives it back, for `delay` seconds if given."""
    c = server.connect()
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(expect_id,)]
    assert value(c, "SELECT queue_abort()" if delay is None else f"SELECT queue_abort({delay})") == 1
    c.close()


def _jobs_with_history(server):
    """jobs: 1 dead (2 deliveries), 2 waiting a minute for its retry, 3 retried once, 4 new."""
    server.sql("CREATE TABLE test.jobs (id INT NOT NULL, msg TEXT) ENGINE=QUEUE MAX_DELIVERIES=2")
    server.sql("INSERT INTO test.jobs VALUES (1, 'poison'), (2, 'later'), (3, 'retried'), (4, 'new')")
    _fail(server, 1)
    _fail(server, 1)  # dead
    _fail(server, 2, delay=60)
    _fail(server, 3)
    assert query(server.connect(), TABLE_STATE)[0][:3] == (4, 1, 1)


def _check_history_kept(server, min_age_ms):
    admin = server.connect()
    rows, dead, delayed, age = query(admin, TABLE_STATE)[0]
    assert (rows, dead, delayed) == (4, 1, 1)
    assert age >= min_age_ms  # the rows kept their insert time
    first, second, third = server.connect(), server.connect(), server.connect()
    assert query(first, "SELECT id, note FROM jobs WHERE queue_wait('jobs', 0)") == [(3, "n")]
    assert value(first, "SELECT queue_delivery_count()") == 2  # its earlier delivery counts
    assert query(second, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(4,)]
    assert value(second, "SELECT queue_delivery_count()") == 1
    assert value(third, "SELECT queue_wait('jobs', 0)") == 0  # 1 is dead, 2 not due for a minute
    assert query(admin, "SELECT id FROM jobs WHERE queue_take_dead('jobs')") == [(1,)]
    assert value(admin, "SELECT queue_delivery_count()") == 3
    for c in (admin, first, second):
        assert value(c, "SELECT queue_abort()") == 1  # 3 is dead now


def test_a_copying_alter_keeps_dead_rows_dead_and_every_rows_age_retries_and_retry_delay(fresh_server):
    server = fresh_server
    _jobs_with_history(server)
    time.sleep(1.0)
    server.sql("ALTER TABLE test.jobs ADD COLUMN note CHAR(1) NOT NULL DEFAULT 'n'")
    _check_history_kept(server, min_age_ms=1000)
    # It is in the new table's file: recovery after a kill -9 (no clean close) finds it again.
    server.kill9()
    server.start()
    rows, dead, delayed, age = query(server.connect(), TABLE_STATE)[0]
    assert (rows, dead, delayed) == (4, 2, 1) and age >= 1000
    worker = server.connect()
    assert query(worker, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(4,)]
    assert value(worker, "SELECT queue_delivery_count()") == 2


def test_alter_order_by_says_that_the_rows_start_over(server):
    _jobs_with_history(server)
    conn = server.connect()
    query(conn, "ALTER TABLE test.jobs ORDER BY id DESC")
    notes = query(conn, "SHOW WARNINGS")
    assert [(level, code) for level, code, _ in notes] == [("Note", 1105)], notes
    assert "ORDER BY re-inserts the rows as new ones" in notes[0][2] and "'test.jobs'" in notes[0][2]
    rows, dead, delayed, _ = query(conn, TABLE_STATE)[0]
    assert (rows, dead, delayed) == (4, 0, 0)
    assert query(conn, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(4,)]  # sorted, fresh
    assert value(conn, "SELECT queue_delivery_count()") == 1


def test_rows_from_another_engine_start_new(server):
    server.sql("CREATE TABLE test.jobs (id INT NOT NULL) ENGINE=InnoDB")
    server.sql("INSERT INTO test.jobs VALUES (1), (2)")
    conn = server.connect()
    query(conn, "ALTER TABLE test.jobs ENGINE=QUEUE MAX_DELIVERIES=1")
    assert query(conn, "SHOW WARNINGS") == []
    rows, dead, delayed, _ = query(conn, TABLE_STATE)[0]
    assert (rows, dead, delayed) == (2, 0, 0)
    assert query(conn, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(1,)]
    assert value(conn, "SELECT queue_delivery_count()") == 1
    # ... and back to InnoDB and to QUEUE again: InnoDB keeps no history, the rows start over.
    assert value(conn, "SELECT queue_abort()") == 1  # row 1 is dead now
    query(conn, "ALTER TABLE test.jobs ENGINE=InnoDB")
    query(conn, "ALTER TABLE test.jobs ENGINE=QUEUE")
    assert query(conn, TABLE_STATE)[0][:3] == (2, 0, 0)


def test_optimize_table_compacts_in_place_and_every_row_keeps_its_history(server):
    _jobs_with_history(server)
    conn = server.connect()
    query(conn, "DELETE FROM jobs WHERE id = 4")
    before = json.loads(value(conn, "SELECT queue_stats('test.jobs')"))["compactions"]
    assert query(conn, "OPTIMIZE TABLE test.jobs") == [("test.jobs", "optimize", "status", "OK")]
    assert json.loads(value(conn, "SELECT queue_stats('test.jobs')"))["compactions"] == before + 1
    rows, dead, delayed, _ = query(conn, TABLE_STATE)[0]
    assert (rows, dead, delayed) == (3, 1, 1)
    assert query(conn, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(3,)]
    assert value(conn, "SELECT queue_delivery_count()") == 2
    assert value(conn, "SELECT queue_rowid()") == 3  # compaction keeps row ids
