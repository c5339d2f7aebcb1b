"""After a queue_wait() that returned 0, as in Q4M: the connection is in owner mode owning no
row. queue_end() and queue_abort() succeed (1) and leave it; until then every QUEUE table looks
empty to the connection, as to any connection in owner mode (it sees only the row it owns)."""
import pymysql
import pytest

from sqlcheck import ER_QUERY_INTERRUPTED, expect_error, query, start_waiter, value


def _queue(server, name="q", n=0):
    server.sql(f"CREATE TABLE test.{name} (v INT) ENGINE=QUEUE")
    if n:
        server.sql(f"INSERT INTO test.{name} VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))


def _q4m_worker(c, wait_sql, rounds):
    """The loop Q4M users write: wait, read what the connection sees, queue_end() every time."""
    seen = []
    for _ in range(rounds):
        got = value(c, wait_sql)
        rows = [r[0] for r in query(c, "SELECT v FROM q")]  # read whatever the wait said
        assert len(rows) == got, (got, rows)  # the owned row, or nothing after a timeout
        seen += rows
        assert value(c, "SELECT queue_end()") == 1
    return seen


def test_a_q4m_worker_loop_on_an_empty_queue(server):
    _queue(server)
    c = server.connect()
    assert _q4m_worker(c, "SELECT queue_wait('q', 0.1)", 3) == []
    assert _q4m_worker(c, "SELECT queue_wait('q', 0)", 2) == []


def test_a_q4m_worker_loop_on_a_queue_with_rows(server):
    _queue(server, n=3)
    c = server.connect()
    assert _q4m_worker(c, "SELECT queue_wait('q', 0)", 5) == [1, 2, 3]
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    server.sql("INSERT INTO test.q VALUES (4)")
    assert _q4m_worker(c, "SELECT queue_wait('q', 0.1)", 2) == [4]
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_queue_tables_look_empty_after_a_timed_out_wait_until_queue_end(server):
    _queue(server)
    _queue(server, "other", n=2)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 0
    query(c, "INSERT INTO q VALUES (7)")  # inserting still works
    assert query(c, "SELECT v FROM q") == []
    assert value(c, "SELECT COUNT(*) FROM q") == 0
    assert query(c, "SELECT v FROM other") == []  # a table it did not wait on too
    assert server.sql("SELECT v FROM test.q") == [(7,)]  # other connections see it
    with c.cursor() as cur:
        assert cur.execute("DELETE FROM q") == 0  # deletes nothing it cannot see
    assert server.value("SELECT COUNT(*) FROM test.q") == 1
    assert value(c, "SELECT queue_rowid()") is None
    assert value(c, "SELECT queue_delivery_count()") is None
    assert value(c, "SELECT queue_end()") == 1  # leaves owner mode, removes nothing
    assert query(c, "SELECT v FROM q") == [(7,)]
    assert query(c, "SELECT v FROM other") == [(1,), (2,)]
    assert server.value("SELECT COUNT(*) FROM test.q") == 1


def test_queue_abort_after_a_timed_out_wait(server):
    _queue(server, "other", n=1)
    _queue(server)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 'other:v > 5', 0)") == 0
    assert query(c, "SELECT v FROM other") == []
    assert value(c, "SELECT queue_abort()") == 1  # returns nothing, leaves owner mode
    assert query(c, "SELECT v FROM other") == [(1,)]
    assert server.value("SELECT COUNT(*) FROM test.other") == 1


def test_outside_owner_mode_queue_end_and_queue_abort_still_fail(server):
    """Only a wait enters owner mode: a second queue_end() (or one with no wait before it)
    is told that the connection owns no row, as before."""
    _queue(server)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 0
    assert value(c, "SELECT queue_end()") == 1
    expect_error(c, "SELECT queue_end()", "queue_end(): this connection does not own a row")
    expect_error(c, "SELECT queue_abort()", "queue_abort(): this connection does not own a row")


def test_the_next_wait_after_a_timed_out_wait_takes_a_row(server):
    _queue(server)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 0
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    assert value(c, "SELECT queue_wait('q', 0)") == 1  # no queue_end() in between
    assert query(c, "SELECT v FROM q") == [(1,)]
    assert value(c, "SELECT queue_end()") == 1
    assert query(c, "SELECT v FROM q") == [(2,)]


def test_a_timed_out_batch_wait_is_the_same(server):
    _queue(server)
    c = server.connect()
    assert query(c, "SELECT v FROM q WHERE queue_wait_batch('q', 10, 0)") == []
    server.sql("INSERT INTO test.q VALUES (1)")
    assert query(c, "SELECT v FROM q") == []
    assert value(c, "SELECT queue_end()") == 1
    assert query(c, "SELECT v FROM q") == [(1,)]


def test_a_connection_closed_after_a_timed_out_wait_leaves_every_row(server):
    _queue(server, "other", n=2)
    c = server.connect()
    assert value(c, "SELECT queue_wait('other:v > 5', 0)") == 0
    c.close()
    assert server.sql("SELECT v FROM test.other") == [(1,), (2,)]
    assert value(server.connect(), "SELECT queue_wait('other', 0)") == 1


def test_queue_take_dead_after_a_timed_out_wait_leaves_owner_mode(server):
    _queue(server, n=1)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q:v > 5', 0)") == 0
    assert query(c, "SELECT v FROM q") == []
    assert value(c, "SELECT queue_take_dead('q')") == 0  # no dead row: out of owner mode
    assert query(c, "SELECT v FROM q") == [(1,)]
    expect_error(c, "SELECT queue_end()", "queue_end(): this connection does not own a row")


def test_a_wait_ended_by_kill_query_enters_no_owner_mode(server):
    _queue(server, n=1)
    c, bg = start_waiter(server, "SELECT queue_wait('q:v > 5', 60)")
    server.sql(f"KILL QUERY {c.thread_id()}")
    with pytest.raises(pymysql.MySQLError) as e:
        bg.join()
    assert e.value.args[0] == ER_QUERY_INTERRUPTED, e.value.args
    assert query(c, "SELECT v FROM q") == [(1,)]
    expect_error(c, "SELECT queue_end()", "queue_end(): this connection does not own a row")


# ---- the note (issue 40, item 9) ------------------------------------------------------

def _notes(c):
    return [(level, code, msg) for level, code, msg in query(c, "SHOW WARNINGS")]


def _owning_nothing_notes(c):
    return [msg for level, _, msg in _notes(c) if level == "Note" and "owner mode owning no row" in msg]


def test_a_read_or_delete_while_owning_nothing_gets_a_note_naming_the_table_and_the_way_out(server):
    """Q4M's behaviour stays (the session sees no row), but an operator is told: COUNT(*) = 0 and
    "0 rows affected" on a table of 102 rows came silently before."""
    _queue(server, n=102)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q:v > 1000', 0)") == 0
    for sql in ("SELECT COUNT(*) FROM q", "SELECT v FROM q", "DELETE FROM q",
                "SELECT COUNT(*) FROM q WHERE v > 5"):
        with c.cursor() as cur:
            cur.execute(sql)
            assert cur.fetchall() in ((), ((0,),)), sql
        notes = _owning_nothing_notes(c)
        assert len(notes) == 1, (sql, _notes(c))
        for part in ("QUEUE table 'test.q'", "owner mode owning no row", "queue_wait() timed out",
                     "queue_end()", "queue_abort()"):
            assert part in notes[0], (sql, notes[0])
    assert server.value("SELECT COUNT(*) FROM test.q") == 102  # nothing deleted
    query(c, "INSERT INTO q VALUES (200)")  # an INSERT is not affected: no note
    assert _owning_nothing_notes(c) == []
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT COUNT(*) FROM q") == 103
    assert _notes(c) == []  # out of owner mode: no note


def test_no_note_for_a_connection_that_owns_a_row_or_consumes(server):
    _queue(server, n=3)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT COUNT(*) FROM q") == 1
    assert _notes(c) == []
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('q:v > 10', 0)") == 0
    # Q4M's consume statement after a timeout: the wait ends owner mode before the table is read.
    assert query(c, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]
    assert _notes(c) == []
    assert value(c, "SELECT queue_end()") == 1
