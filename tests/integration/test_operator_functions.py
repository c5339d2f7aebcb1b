"""The operators' functions the monitor's dashboard calls: queue_release_owned(),
queue_redrive_dead(), queue_purge_dead(), queue_allowed(), queue_scan_rowid()/queue_scan_state(),
and the counters queue_stats() gained for the metrics."""
import json

import pymysql
import pytest

from binlog_modes import both_binlog_modes

from sqlcheck import query, value

PASSWORD = "pw-op"


def _dead_table(server, n, table="jobs"):
    """`table` with MAX_DELIVERIES=1 holding n rows, every one dead."""
    server.sql(f"CREATE TABLE test.{table} (id INT, body VARCHAR(20)) ENGINE=QUEUE MAX_DELIVERIES=1")
    server.sql(f"INSERT INTO test.{table} VALUES " + ", ".join(f"({i}, 'm{i}')" for i in range(1, n + 1)))
    c = server.connect()
    for _ in range(n):
        assert value(c, f"SELECT queue_wait('test.{table}', 0)") == 1
        assert value(c, "SELECT queue_abort()") == 1
    assert _stats(server, table)["dead_rows"] == n


def _stats(server, table="jobs"):
    return server.queue_stats(f"test.{table}")


def _user(server, name, grants):
    server.sql(f"CREATE USER IF NOT EXISTS '{name}'@'localhost' IDENTIFIED BY '{PASSWORD}'")
    for g in grants:
        server.sql(f"GRANT {g} TO '{name}'@'localhost'")
    return pymysql.connect(unix_socket=str(server.socket), user=name, password=PASSWORD, database="test",
                           autocommit=True)


@pytest.fixture
def users(server):
    made = []
    yield made
    for name in made:
        server.sql(f"DROP USER IF EXISTS '{name}'@'localhost'")


def test_release_gives_the_row_to_the_next_consumer_and_fails_the_owners_end_with_1205(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1)")
    hung, other, op = server.connect(), server.connect(), server.connect()
    assert value(hung, "SELECT queue_wait('q', 0)") == 1
    row = value(hung, "SELECT queue_rowid()")
    hung_id = value(hung, "SELECT CONNECTION_ID()")
    assert server.value("SELECT CONNECTION_ID FROM information_schema.QUEUE_OWNED_ROWS") == hung_id
    assert value(op, "SELECT queue_release_owned('test.q', %s)", (row,)) == 1
    assert server.sql("SELECT * FROM information_schema.QUEUE_OWNED_ROWS") == []
    assert query(other, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    assert value(other, "SELECT queue_delivery_count()") == 2

    with pytest.raises(pymysql.err.OperationalError) as e:
        value(hung, "SELECT queue_end()")
    assert e.value.args[0] == 1205
    op_id = value(op, "SELECT CONNECTION_ID()")
    assert f"given back to the queue by connection {op_id} (queue_release_owned())" in e.value.args[1]
    assert "was not removed" in e.value.args[1]
    assert value(hung, "SELECT 1") == 1  # out of owner mode: it goes on normally
    assert value(other, "SELECT queue_end()") == 1
    assert value(op, "SELECT queue_release_owned('test.q', %s)", (row,)) == 0  # gone now
    assert _stats(server, "q")["rows_released"] == 1


def test_release_while_the_owner_waits_in_queue_wait_reports_at_its_next_wait(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    hung, op = server.connect(), server.connect()
    assert value(hung, "SELECT queue_wait('q', 0)") == 1
    assert value(op, "SELECT queue_release_owned('test.q', %s)", (value(hung, "SELECT queue_rowid()"),)) == 1
    with pytest.raises(pymysql.err.OperationalError) as e:
        value(hung, "SELECT queue_wait('q', 0)")
    assert e.value.args[0] == 1205
    assert server.value("SELECT `ROWS` FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'") == 2


@both_binlog_modes
def test_redrive_and_purge_of_dead_rows(server, binlog, request):
    if binlog:
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "known gap with the binary log on: queue_purge_dead() removes the rows but queue_stats() "
            "does not count them in rows_purged (closing note of 2026-11-28)")))
    _dead_table(server, 5)
    op = server.connect()
    assert value(op, "SELECT queue_redrive_dead('test.jobs', 2)") == 2
    s = _stats(server)
    assert (s["dead_rows"], s["rows"], s["rows_redriven"], s["rows_dead_lettered"]) == (3, 5, 2, 5)
    # the redriven rows are queued again, fresh under MAX_DELIVERIES, at the queue's end
    c = server.connect()
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(1,)]
    assert value(c, "SELECT queue_delivery_count()") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert value(op, "SELECT queue_purge_dead('test.jobs', 1)") == 1
    assert value(op, "SELECT queue_purge_dead('test.jobs')") == 2
    s = _stats(server)
    assert (s["dead_rows"], s["rows"], s["rows_purged"]) == (0, 1, 3)
    assert query(c, "SELECT id FROM jobs") == [(2,)]
    assert value(op, "SELECT queue_redrive_dead('test.jobs')") == 0  # none left


def test_redrive_survives_a_kill9_as_one_atomic_change(fresh_server):
    s = fresh_server
    _dead_table(s, 3)
    assert s.value("SELECT queue_redrive_dead('test.jobs')") == 3
    s.restart(kill=True)
    st = json.loads(s.value("SELECT queue_stats('test.jobs')"))
    assert (st["rows"], st["dead_rows"]) == (3, 0)  # the copies, queued; no dead original left
    c = s.connect()
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(1,)]


def test_scan_functions_show_each_rows_id_and_state(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MAX_DELIVERIES=1")
    server.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    dead_id = value(c, "SELECT queue_rowid()")
    assert value(c, "SELECT queue_abort()") == 1  # row 1 is dead
    assert value(c, "SELECT queue_wait('q', 0)") == 1  # row 2 owned by c
    viewer = server.connect()
    rows = query(viewer, "SELECT queue_scan_rowid(), queue_scan_state(), v FROM q")
    assert rows == [(dead_id, "dead", 1), (dead_id + 2, "queued", 3)]  # c's row is invisible here
    assert query(viewer, "SELECT v FROM q WHERE queue_scan_state() = 'dead'") == [(1,)]
    assert query(viewer, "SELECT v FROM q WHERE queue_scan_rowid() > %s LIMIT 1", (dead_id,)) == [(3,)]
    assert query(c, "SELECT queue_scan_state(), v FROM q") == [("owned", 2)]
    assert value(viewer, "SELECT queue_scan_rowid()") is None  # no scan: NULL
    # a prepared statement, executed twice
    cur = viewer.cursor(pymysql.cursors.Cursor)
    for _ in range(2):
        cur.execute("SELECT queue_scan_state() FROM q WHERE queue_scan_rowid() = %s", (dead_id,))
        assert cur.fetchall() == (("dead",),)


def test_privileges_are_checked_and_queue_allowed_tells_them(server, users):
    _dead_table(server, 2)
    users += ["q_reader", "q_operator"]
    reader = _user(server, "q_reader", ["SELECT ON test.*"])
    operator = _user(server, "q_operator", ["SELECT, INSERT, DELETE ON test.jobs"])
    for fn in ("queue_release_owned", "queue_redrive_dead", "queue_purge_dead"):
        assert value(reader, "SELECT queue_allowed('test.jobs', %s)", (fn,)) == 0
        assert value(operator, "SELECT queue_allowed('test.jobs', %s)", (fn,)) == 1
    with pytest.raises(pymysql.err.OperationalError) as e:
        value(reader, "SELECT queue_redrive_dead('test.jobs')")
    assert e.value.args[0] == 1142  # DELETE/INSERT command denied
    with pytest.raises(pymysql.err.OperationalError) as e:
        value(reader, "SELECT queue_purge_dead('test.jobs')")
    assert e.value.args[0] == 1142
    with pytest.raises(pymysql.err.OperationalError) as e:
        value(reader, "SELECT queue_release_owned('test.jobs', 1)")
    assert e.value.args[0] == 1142
    assert _stats(server)["dead_rows"] == 2  # nothing happened
    users.append("q_blind")
    blind = _user(server, "q_blind", ["DELETE ON test.jobs"])  # may delete, not read: learns nothing
    for table in ("test.jobs", "test.nope"):
        with pytest.raises(pymysql.err.OperationalError) as e:
            value(blind, "SELECT queue_allowed(%s, 'queue_purge_dead')", (table,))
        assert e.value.args[0] == 1142, table
    blind.close()
    assert value(operator, "SELECT queue_redrive_dead('test.jobs')") == 2
    reader.close()
    operator.close()


def test_bad_arguments_are_clear_errors(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    cases = [
        ("SELECT queue_purge_dead('test.q', -1)",
         "queue_purge_dead(): argument 2: invalid max_rows -1 (expected a whole number from 0 to"),
        ("SELECT queue_redrive_dead('test.q', 'many')", "queue_redrive_dead(): argument 2: invalid max_rows many"),
        ("SELECT queue_release_owned('test.q', NULL)", "queue_release_owned(): argument 2: invalid row id NULL"),
        ("SELECT queue_release_owned('test.nope', 1)", "queue_release_owned(): argument 1: table 'test.nope' does not exist"),
        ("SELECT queue_allowed('test.q', 'queue_wait')", "queue_allowed(): argument 2: 'queue_wait' is not a function"),
        ("SELECT queue_purge_dead()", "queue_purge_dead() takes 1 or 2 arguments"),
        ("SELECT queue_release_owned('test.q')", "queue_release_owned() takes 2 arguments"),
        ("SELECT queue_scan_state(1)", "queue_scan_state() takes no arguments"),
    ]
    for sql, text in cases:
        with pytest.raises(pymysql.err.MySQLError) as e:
            value(c, sql)
        assert text in e.value.args[1], (sql, e.value.args)


def test_stats_counts_consumed_aborted_dead_letters_and_the_handout_wait(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MAX_DELIVERIES=2")
    server.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    c = server.connect()
    assert value(c, "SELECT queue_wait_batch('q', 2, 0)") == 2
    assert value(c, "SELECT queue_end()") == 1
    for _ in range(2):
        assert value(c, "SELECT queue_wait('q', 0)") == 1
        assert value(c, "SELECT queue_abort()") == 1
    s = _stats(server, "q")
    assert (s["rows_consumed"], s["ends"], s["rows_aborted"], s["rows_dead_lettered"]) == (2, 1, 2, 1)
    h = s["handout_wait"]
    assert h["bounds_ms"][:3] == [1, 5, 10] and len(h["cumulative"]) == len(h["bounds_ms"]) + 1
    assert h["cumulative"][-1] == 3  # three first hand-outs; a redelivery is not one
    assert h["cumulative"] == sorted(h["cumulative"])
    assert s["oldest_ready_age_ms"] == 0  # the one row left is dead
    server.sql("INSERT INTO test.q VALUES (4)")
    assert _stats(server, "q")["oldest_ready_age_ms"] >= 1
    status = {name: int(v) for _, name, v in server.sql("SHOW ENGINE QUEUE STATUS")}
    assert status["rows_dead_lettered"] >= 1
