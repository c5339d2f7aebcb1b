"""Rows a connection owns across a copying ALTER TABLE (one that rebuilds the table: ADD
COLUMN, ENGINE=QUEUE, FORCE ...). The copy keeps every row's id, and the rows a connection owns
stay owned by it in the new table: nobody else gets them, its queue_end() removes them from the
new table, queue_abort() or a disconnect gives them back there, its lease runs on. Before, the
new table had every row free under new ids: another connection got the owned row at once and
the owner's queue_end() answered 1 having removed nothing (double processing, nobody told).

Every test runs with the binary log off and on (both_binlog_modes): with it on, an end is a
statement transaction that claims the rows, logs their removal and commits it; it claimed them
in the old table, where they were gone, so queue_end() answered 1, removed nothing, logged
nothing, and the row stayed owned (its group or MAX_IN_FLIGHT slot held until a restart, which
handed it out again).

Where the rows cannot stay owned (ALTER ... ENGINE=InnoDB), the owner's next queue_end() or
queue_wait() fails like an expired lease (1205, "not removed"). ALTER ... ORDER BY, which gives
the rows new ids, is refused while rows are owned."""
import threading

import pymysql
import pytest

from sqlcheck import Background, expect_error, query, value, wait_until
from test_binlog import binlog_events, binlog_position, removals_logged

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes

ER_LOCK_WAIT_TIMEOUT = 1205  # a lease ran out, or the ALTER could not keep the row owned
ER_ILLEGAL_HA = 1031
ER_QUERY_INTERRUPTED = 1317

STATE = ("SELECT `ROWS`, OWNED_ROWS FROM information_schema.QUEUE_TABLES "
         "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='a'")
COPYING = ["ADD COLUMN x INT", "ENGINE=QUEUE", "FORCE", "ADD COLUMN x INT, ALGORITHM=COPY"]


def _jobs(server, n, options="", consumed=0):
    """test.a with rows id=1..n; the first `consumed` of them already consumed, so that row ids
    (1..n) and a new table's fresh ids (1, 2, ...) differ."""
    server.sql(f"CREATE TABLE test.a (id INT NOT NULL, g VARCHAR(10)) ENGINE=QUEUE {options}")
    server.sql("INSERT INTO test.a (id) VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))
    c = server.connect()
    for i in range(1, consumed + 1):
        assert query(c, "SELECT id FROM a WHERE queue_wait('a', 0)") == [(i,)]
    if consumed:
        assert value(c, "SELECT queue_end()") == 1
    c.close()


def _take(c, table="a"):
    rows = query(c, f"SELECT id FROM {table} WHERE queue_wait('{table}', 0)")
    return rows[0][0] if rows else None


def _state(server):
    return tuple(server.sql(STATE)[0])


def _removed_ids(server, since):
    """The row ids of test.a whose removal the binary log holds after position `since`."""
    with server.admin().cursor() as cur:
        return [i for rows in removals_logged(binlog_events(cur, since), "a") for i, _ in rows]


def _log_position(server):
    if not server.binlog:
        return None
    with server.admin().cursor() as cur:
        return binlog_position(cur)


@pytest.mark.parametrize("options", ["", "MESSAGE_GROUP_COLUMN='g'", "MAX_IN_FLIGHT=1"])
@pytest.mark.parametrize("end", ["queue_end", "the next wait", "a batch's end"])
@pytest.mark.parametrize("ddl", ["ALTER TABLE test.a ADD COLUMN x INT", "OPTIMIZE TABLE test.a"])
def test_an_end_after_a_copying_alter_removes_the_row_logs_it_and_frees_its_slot(server, options, end, ddl):
    """The false acknowledgement of issue 40, item 1: with the binary log on, queue_end() after
    the ALTER answered 1, but the row stayed owned, no removal was logged, and a group or
    MAX_IN_FLIGHT=1 stayed held."""
    server.sql(f"CREATE TABLE test.a (id INT NOT NULL, g VARCHAR(10)) ENGINE=QUEUE {options}")
    server.sql("INSERT INTO test.a VALUES (1, 'x'), (2, 'x'), (3, 'x')")
    a = server.connect()
    if end == "a batch's end":
        assert value(a, "SELECT queue_wait_batch('a', 1, 0)") == 1
    else:
        assert _take(a) == 1
    since = _log_position(server)
    server.sql(ddl)
    if end == "the next wait":  # ends row 1; row 2 is free for the take
        assert value(a, "SELECT queue_wait('a', 10)") == 1
        assert query(a, "SELECT id FROM a") == [(2,)]
        assert _state(server) == (2, 1)
        assert value(a, "SELECT queue_end()") == 1
        if server.binlog:
            assert _removed_ids(server, since) == [1, 2]
    else:
        assert value(a, "SELECT queue_end()") == 1
        assert _state(server) == (2, 0)  # removed, and owned by nobody
        if server.binlog:
            assert _removed_ids(server, since) == [1]
        assert _take(a) == 2  # the group, the table's one slot: free again
        assert value(a, "SELECT queue_end()") == 1
    a.close()
    assert server.sql("SELECT id FROM test.a") == [(3,)]


@pytest.mark.parametrize("options", ["", "MESSAGE_GROUP_COLUMN='g'", "MAX_IN_FLIGHT=1"])
def test_a_row_ended_after_a_copying_alter_stays_gone_after_a_restart(server_factory, binlog, options):
    s = server_factory.new(binlog=binlog, at_startup=True)
    try:
        s.sql(f"CREATE TABLE test.a (id INT NOT NULL, g VARCHAR(10)) ENGINE=QUEUE {options}")
        s.sql("INSERT INTO test.a VALUES (1, 'x'), (2, 'x')")
        a = s.connect()
        assert _take(a) == 1
        s.sql("ALTER TABLE test.a ADD COLUMN x INT")
        assert value(a, "SELECT queue_end()") == 1
        a.close()
        s.restart()
        c = s.connect()
        assert _take(c) == 2  # never the acknowledged row 1
        assert value(c, "SELECT queue_end()") == 1
        assert s.value("SELECT COUNT(*) FROM test.a") == 0
    finally:
        s.destroy()


@pytest.mark.parametrize("alter", COPYING)
def test_an_owned_row_stays_owned_across_a_copying_alter(server, alter):
    _jobs(server, 5, consumed=2)
    a, b = server.connect(), server.connect()
    assert _take(a) == 3
    rowid = value(a, "SELECT queue_rowid()")
    assert rowid == 3
    query(b, f"ALTER TABLE a {alter}")
    assert value(a, "SELECT queue_rowid()") == rowid  # the same row, under the same id
    assert _take(b) == 4  # not a's row
    assert value(b, "SELECT queue_rowid()") == 4
    assert query(a, "SELECT id FROM a") == [(3,)]  # a sees its row only, as before the ALTER
    assert value(a, "SELECT queue_delivery_count()") == 1
    assert _state(server) == (3, 2)
    assert value(a, "SELECT queue_end()") == 1
    assert _state(server) == (2, 1)  # removed from the new table
    assert value(b, "SELECT queue_end()") == 1
    assert server.sql("SELECT id FROM test.a") == [(5,)]
    assert _take(b) == 5 and _take(b) is None  # row 3 never comes back


def test_abort_after_the_alter_gives_the_row_back_with_its_delivery(server):
    _jobs(server, 3)
    a, b = server.connect(), server.connect()
    assert _take(a) == 1
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    assert _take(b) == 2
    assert value(a, "SELECT queue_abort()") == 1
    assert value(a, "SELECT queue_rowid()") is None
    assert _take(a) == 1
    assert value(a, "SELECT queue_delivery_count()") == 2  # the delivery before the ALTER counts


def test_a_batch_stays_owned_across_the_alter(server):
    _jobs(server, 6, consumed=1)
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait_batch('a', 3, 0)") == 3
    before = query(a, "SELECT queue_rowid(), id FROM a")
    assert before == [(2, 2), (3, 3), (4, 4)]
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    assert _take(b) == 5
    assert query(a, "SELECT queue_rowid(), id FROM a") == before
    assert value(a, "SELECT COUNT(*) FROM a") == 3
    assert _state(server) == (5, 4)
    assert value(a, "SELECT queue_end()") == 1  # all three, from the new table
    assert _state(server) == (2, 1)
    assert value(b, "SELECT queue_end()") == 1
    assert server.sql("SELECT id FROM test.a") == [(6,)]


def test_a_batch_aborted_after_the_alter_comes_back_whole(server):
    _jobs(server, 4)
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait_batch('a', 3, 0)") == 3
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    assert _take(b) == 4
    assert value(a, "SELECT queue_abort()") == 1
    assert value(b, "SELECT queue_wait_batch('a', 10, 0)") == 3
    assert query(b, "SELECT id, queue_delivery_count() FROM a") == [(1, 2), (2, 2), (3, 2)]


def test_consumers_disconnecting_after_the_alter_return_their_rows_to_the_new_table(server):
    _jobs(server, 4)
    a, c, b = server.connect(), server.connect(), server.connect()
    assert value(a, "SELECT queue_wait_batch('a', 2, 0)") == 2
    assert _take(c) == 3
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    assert _take(b) == 4
    assert value(b, "SELECT queue_end()") == 1
    a.close()
    c.close()
    wait_until(lambda: _state(server) == (3, 0), what="the disconnects to return rows 1-3")
    assert value(b, "SELECT queue_wait_batch('a', 10, 0)") == 3
    assert query(b, "SELECT id, x, queue_delivery_count() FROM a") == [(1, None, 2), (2, None, 2), (3, None, 2)]


def test_a_lease_runs_on_across_the_alter(server):
    _jobs(server, 3)
    a, b = server.connect(), server.connect()
    query(a, "SET SESSION queue_lease_timeout = 3600")
    assert _take(a) == 1
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    lease_left = server.value("SELECT LEASE_LEFT_MS FROM information_schema.QUEUE_OWNED_ROWS "
                              "WHERE TABLE_NAME='a' AND ROW_ID=1")
    assert lease_left is not None and lease_left > 3_000_000
    assert _take(b) == 2
    # The lease ends: the row goes back to the new table, and a is told its end came too late.
    assert value(a, "SELECT queue_renew_lease(1)") == 1
    waiter = server.connect()
    assert value(waiter, "SELECT queue_wait('test.a:id = 1', 60)") == 1  # once a's lease ran out
    assert value(waiter, "SELECT queue_rowid()") == 1
    expect_error(a, "SELECT queue_end()", "lease expired", "row 1", "not removed", code=ER_LOCK_WAIT_TIMEOUT)
    assert value(waiter, "SELECT queue_end()") == 1
    assert server.sql("SELECT id FROM test.a") == [(3,)]  # b owns 2


def test_an_owned_row_keeps_holding_its_message_group(server):
    server.sql("CREATE TABLE test.a (id INT NOT NULL, g VARCHAR(10)) ENGINE=QUEUE MESSAGE_GROUP_COLUMN='g'")
    server.sql("INSERT INTO test.a VALUES (1, 'alice'), (2, 'alice'), (3, 'bob')")
    a, b = server.connect(), server.connect()
    assert _take(a) == 1
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    assert _take(b) == 3  # alice's 2 waits for 1, still owned by a
    assert _take(server.connect()) is None
    assert value(a, "SELECT queue_end()") == 1
    assert _take(server.connect()) == 2


def test_an_owned_row_aborted_after_the_alter_dies_at_max_deliveries(server):
    _jobs(server, 2, options="MAX_DELIVERIES=1")
    a, b = server.connect(), server.connect()
    assert _take(a) == 1
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    assert value(a, "SELECT queue_abort()") == 1
    assert server.value("SELECT DEAD_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='a'") == 1
    assert _take(b) == 2


def test_the_owner_is_listed_in_queue_owned_rows_of_the_new_table(server):
    _jobs(server, 2)
    a = server.connect()
    assert _take(a) == 1
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    listed = server.sql("SELECT TABLE_NAME, ROW_ID, CONNECTION_ID, DELIVERY_COUNT FROM "
                        "information_schema.QUEUE_OWNED_ROWS WHERE TABLE_SCHEMA='test'")
    assert listed == [("a", 1, a.thread_id(), 1)]


def test_consumers_running_through_copying_alters_process_every_row_once(server):
    """A schema migration on a busy queue: consumers take and end rows while ALTERs copy the
    table again and again. A row counts as processed when its queue_end() returned 1: each
    row must be processed exactly once."""
    n = 1500
    server.sql("CREATE TABLE test.a (id INT NOT NULL, g VARCHAR(10)) ENGINE=QUEUE")
    server.sql(f"INSERT INTO test.a (id) SELECT seq FROM seq_1_to_{n}")
    processed, failures = [], []
    stop = threading.Event()

    def consume():
        c = server.connect()
        while True:
            rows = query(c, "SELECT id FROM a WHERE queue_wait('a', 1)")
            if not rows:  # a timeout, or the wait gave way to an ALTER
                if stop.is_set():
                    return
                continue
            try:
                if value(c, "SELECT queue_end()") == 1:
                    processed.append(rows[0][0])
            except pymysql.MySQLError as e:  # told that the row was not removed: not processed
                failures.append(e.args)

    consumers = [Background(consume) for _ in range(3)]
    for i in range(6):
        wait_until(lambda: len(processed) > 150 * i, what=f"consumption before ALTER {i + 1}")
        server.sql("ALTER TABLE test.a ENGINE=QUEUE" if i % 2 else f"ALTER TABLE test.a ADD COLUMN x{i} INT")
    wait_until(lambda: server.value("SELECT COUNT(*) FROM test.a") == 0 and _state(server)[1] == 0,
               timeout=120, what="every row consumed")
    stop.set()
    for c in consumers:
        c.join()
    duplicates = sorted({i for i in processed if processed.count(i) > 1})
    assert not duplicates, f"processed twice: {duplicates[:20]}"
    assert sorted(processed) == list(range(1, n + 1))
    assert failures == []  # every owner's row stayed its own


def test_an_end_after_the_alter_survives_kill9(fresh_server):
    server = fresh_server
    _jobs(server, 4, consumed=1)
    a, b = server.connect(), server.connect()
    assert _take(a) == 2
    assert _take(b) == 3
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    assert value(a, "SELECT queue_end()") == 1
    server.kill9()  # b still owns row 3
    server.start()
    c = server.connect()
    assert query(c, "SELECT queue_rowid(), id FROM a WHERE queue_wait_batch('a', 10, 0)") == [(3, 3), (4, 4)]
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.a") == 0


def test_an_alter_that_fails_in_the_copy_keeps_the_rows_owned(server):
    server.sql("CREATE TABLE test.a (id INT NOT NULL, g VARCHAR(10)) ENGINE=QUEUE")
    server.sql("INSERT INTO test.a VALUES (1, '1'), (2, '2'), (3, 'three')")
    a, b = server.connect(), server.connect()
    assert _take(a) == 1
    query(b, "SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
    expect_error(b, "ALTER TABLE a MODIFY g INT", "three")  # the third row fails the copy
    assert _take(b) == 2
    assert value(a, "SELECT queue_end()") == 1
    assert value(b, "SELECT queue_end()") == 1
    assert server.sql("SELECT id FROM test.a") == [(3,)]


def test_an_alter_killed_after_its_copy_keeps_ownership_and_the_ends_made_meanwhile(server):
    """The ALTER copies, then waits for a reader's metadata lock: the owners' rows are in the new
    table by then. One owner ends its row meanwhile; then the ALTER is killed and the old table
    stays: the end holds there, and the other owner still owns its row."""
    _jobs(server, 4)
    a, d, b = server.connect(), server.connect(), server.connect()
    assert _take(a) == 1
    assert _take(d) == 2
    reader = server.connect()
    query(reader, "BEGIN")
    query(reader, "SELECT COUNT(*) FROM a")  # holds the table's metadata lock until COMMIT
    ddl = server.connect()
    alter = Background(lambda: query(ddl, "ALTER TABLE a ADD COLUMN x INT"))

    def alter_waits_for_the_reader():
        state = server.value("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID=%s", (ddl.thread_id(),))
        return state == "Waiting for table metadata lock"
    wait_until(alter_waits_for_the_reader, what="the ALTER to copy and wait for the reader")
    if server.binlog:
        # The end is a statement transaction that writes the table: it waits for the ALTER's
        # metadata lock, and goes through once the ALTER is killed.
        end = Background(lambda: value(a, "SELECT queue_end()"))

        def end_waits_for_the_alter():
            state = server.value("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID=%s", (a.thread_id(),))
            return state == "Waiting for table metadata lock"
        wait_until(end_waits_for_the_alter, what="the end to wait for the ALTER")
    else:
        assert value(a, "SELECT queue_end()") == 1
    server.sql(f"KILL QUERY {ddl.thread_id()}")
    with pytest.raises(pymysql.MySQLError) as failed:
        alter.join()
    assert failed.value.args[0] == ER_QUERY_INTERRUPTED
    if server.binlog:
        assert end.join() == 1
    query(reader, "COMMIT")
    assert [r[0] for r in server.sql("SHOW COLUMNS FROM test.a")] == ["id", "g"]  # not altered
    assert _state(server) == (3, 1)  # row 1 gone, d owns 2
    assert _take(b) == 3
    assert value(d, "SELECT queue_end()") == 1
    assert value(b, "SELECT queue_end()") == 1
    assert server.sql("SELECT id FROM test.a") == [(4,)]


def test_leaving_the_engine_tells_the_owner_that_its_row_was_not_removed(server):
    _jobs(server, 3)
    a = server.connect()
    assert _take(a) == 1
    server.sql("ALTER TABLE test.a ENGINE=InnoDB")
    assert value(a, "SELECT queue_rowid()") is None
    expect_error(a, "SELECT queue_end()", "queue_end()", "test.a", "ALTER TABLE", "not removed",
                 code=ER_LOCK_WAIT_TIMEOUT)
    expect_error(a, "SELECT queue_end()", "does not own a row")
    assert server.sql("SELECT id FROM test.a ORDER BY id") == [(1,), (2,), (3,)]


def test_alter_order_by_is_refused_while_rows_are_owned(server):
    """ORDER BY writes the rows in another order, under new ids: they cannot stay owned."""
    _jobs(server, 3)
    a, b = server.connect(), server.connect()
    assert _take(a) == 1
    expect_error(b, "ALTER TABLE a ORDER BY id DESC", "QUEUE table 'test.a'", "ORDER BY", "1 row",
                 code=ER_ILLEGAL_HA)
    assert _take(b) == 2
    assert value(a, "SELECT queue_end()") == 1
    assert value(b, "SELECT queue_end()") == 1
    query(b, "ALTER TABLE a ORDER BY id DESC")  # nothing owned: the rows start over, with new ids
    assert _take(b) == 3
    assert value(b, "SELECT queue_rowid()") > 3  # never an id the table used before


def test_optimize_compacts_in_place_and_keeps_the_row_owned(server):
    _jobs(server, 3)
    a, b = server.connect(), server.connect()
    assert _take(a) == 1
    assert query(b, "OPTIMIZE TABLE a") == [("test.a", "optimize", "status", "OK")]
    assert _take(b) == 2
    assert value(a, "SELECT queue_end()") == 1
    assert value(b, "SELECT queue_end()") == 1
    assert server.sql("SELECT id FROM test.a") == [(3,)]


# ---- relay dedup (queue_set_srcid) ------------------------------------------------------

def test_a_copying_alter_never_gives_a_new_row_an_old_id(fresh_server):
    """A relay destination drops a row whose source id is not above the last one it received:
    new rows of an altered source must not start again at 1."""
    server = fresh_server
    _jobs(server, 3, consumed=3)
    server.sql("ALTER TABLE test.a ADD COLUMN x INT")
    server.kill9()  # the new table's file alone must know
    server.start()
    server.sql("INSERT INTO test.a (id) VALUES (4)")
    c = server.connect()
    assert _take(c) == 4
    assert value(c, "SELECT queue_rowid()") == 4


def test_a_relay_destination_keeps_its_source_records_across_a_copying_alter(fresh_server):
    server = fresh_server
    server.sql("CREATE TABLE test.dst (id INT NOT NULL) ENGINE=QUEUE")
    c = server.connect()
    assert value(c, "SELECT queue_set_srcid(7, 'a', 3)") == 1
    query(c, "INSERT INTO dst VALUES (3)")
    server.sql("ALTER TABLE test.dst ADD COLUMN x INT")
    server.kill9()
    server.start()
    c = server.connect()
    assert value(c, "SELECT queue_set_srcid(7, 'a', 3)") == 1
    query(c, "INSERT INTO dst (id) VALUES (3)")  # a replay: dropped
    assert value(c, "SELECT queue_set_srcid(7, 'a', 4)") == 1
    query(c, "INSERT INTO dst (id) VALUES (4)")
    assert server.sql("SELECT id FROM test.dst") == [(3,), (4,)]
