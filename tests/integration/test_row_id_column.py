"""ROW_ID_COLUMN='col': a BIGINT UNSIGNED column of a QUEUE table that reads its row's id
(`queue_rowid()`) and lets an INSERT ask for one (at least the table's next id), and the
AUTO_INCREMENT table option (where ids given to rows that ask none start; SHOW CREATE TABLE
shows the next one). Binary log off and on, in transactions with InnoDB rows, across restarts,
kill -9, ALTER TABLE, compaction and TRUNCATE, through mariadb-dump, and a replica seeded from a
dump taken under load, which holds the primary's rows under the primary's ids (a plain table's
restore numbers its rows from 1 again, and the replica's applier then removes other rows)."""
import re
import subprocess
import threading

import pymysql
import pytest

from replication_pair import SYNC_TIMEOUT_S, _free_port
from sqlcheck import consume_job, expect_error, owned_row_id, query, value, wait_until
from test_backup import _load

ER_ILLEGAL_HA_CREATE_OPTION = 1478
BINLOG_ARGS = ["--server-id=1", "--log-bin=bin", "--binlog-format=ROW"]
NULLABLE = "qid BIGINT UNSIGNED INVISIBLE"
NOT_NULL = "qid BIGINT UNSIGNED NOT NULL DEFAULT 0 INVISIBLE"  # INVISIBLE NOT NULL needs a default
ROW_ID_TABLE = f"CREATE TABLE test.q (v INT, {NULLABLE}) ENGINE=QUEUE ROW_ID_COLUMN='qid'"


@pytest.fixture(scope="module")
def _binlog_server(server_factory):
    s = server_factory.new(extra_args=BINLOG_ARGS, at_startup=True)
    yield s
    s.destroy()


@pytest.fixture(params=["binlog-off", "binlog-on"])
def any_server(request):
    """The shared server (binary log off), or this module's server with the binary log on
    (its test tables dropped after the test)."""
    if request.param == "binlog-off":
        yield request.getfixturevalue("server")
        return
    s = request.getfixturevalue("_binlog_server")
    s.check_alive("before the test")
    yield s
    s.check_alive("during the test")
    s._close_conns()
    for (t,) in s.sql("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='test'"):
        s.sql(f"DROP TABLE test.`{t}`")


def _rows(server, table="q", columns="qid, v"):
    """The table's rows as (ROW_ID_COLUMN, value), by id."""
    return server.sql(f"SELECT {columns} FROM test.{table} ORDER BY qid")


def _scan_ids(server, table="q"):
    """(the scan's row id, ROW_ID_COLUMN) of every row: the column must read the row's id."""
    return server.sql(f"SELECT queue_scan_rowid(), qid FROM test.{table}")


def _assert_column_is_the_row_id(server, table="q"):
    pairs = _scan_ids(server, table)
    assert all(rowid == qid for rowid, qid in pairs), pairs


def _auto_increment(conn, table="q"):
    """The AUTO_INCREMENT=N of SHOW CREATE TABLE, None where it shows none."""
    ddl = query(conn, f"SHOW CREATE TABLE {table}")[0][1]
    m = re.search(r" AUTO_INCREMENT=(\d+)", ddl)
    return int(m.group(1)) if m else None


def _insert_for_id(c, table="q", v=0, asked=None):
    """Inserts a row (asking `asked` if given) into a ROW_ID_COLUMN table; the id it got."""
    if asked is None:
        query(c, f"INSERT INTO {table} (v) VALUES (%s)", (v,))
    else:
        query(c, f"INSERT INTO {table} (v, qid) VALUES (%s, %s)", (v, asked))
    return value(c, f"SELECT qid FROM {table} WHERE v = %s", (v,))


def _next_plain_id(c, table, v):
    """Inserts row v into a table without ROW_ID_COLUMN; its row id (queue_scan_rowid())."""
    query(c, f"INSERT INTO {table} (v) VALUES (%s)", (v,))
    return value(c, f"SELECT queue_scan_rowid() FROM {table} WHERE v = %s", (v,))


def _expect_refused_id(c, sql, asked, table="test.q"):
    """An INSERT asking an id below the table's next id: an error naming the table, the
    column and the id."""
    _, msg = expect_error(c, sql, table, "ROW_ID_COLUMN", "qid")
    assert re.search(rf"\b{asked}\b", msg), f"{sql!r}: error {msg!r} does not name id {asked}"


def _dump(server, *options, db="test"):
    dump = subprocess.run(["mariadb-dump", f"--socket={server.socket}", "-uroot", *options, db],
                          capture_output=True, timeout=120)
    assert dump.returncode == 0, dump.stderr.decode()
    return dump.stdout


def _restore(server, dump, db="test"):
    load = subprocess.run(["mariadb", f"--socket={server.socket}", "-uroot", db], input=dump,
                          capture_output=True, timeout=120)
    assert load.returncode == 0, load.stderr.decode()


# ---- 1. reading -------------------------------------------------------------------------------

def test_the_column_reads_the_rows_id_and_null_before_the_commit(any_server):
    s = any_server
    c, consumer = s.connect(), s.connect()
    query(c, ROW_ID_TABLE)
    query(c, "INSERT INTO q VALUES (10), (20)")  # Q4M clients' INSERT: the column is INVISIBLE
    query(c, "INSERT INTO q VALUES (30)")
    assert query(c, "SELECT * FROM q") == [(10,), (20,), (30,)]
    assert query(c, "SELECT qid, v FROM q") == [(1, 10), (2, 20), (3, 30)]
    assert query(c, "SELECT v FROM q WHERE qid = 2") == [(20,)]
    _assert_column_is_the_row_id(s)
    # Owner mode: the column of the owned row is queue_rowid().
    assert query(consumer, "SELECT qid, v FROM q WHERE queue_wait('test.q', 0)") == [(1, 10)]
    assert value(consumer, "SELECT queue_rowid()") == 1
    assert value(consumer, "SELECT queue_wait('test.q', 0)") == 1  # ends row 1, takes row 2
    assert owned_row_id(consumer, column="qid") == (2, 2)
    assert value(consumer, "SELECT queue_end()") == 1
    # A row of the connection's own open transaction has no id yet: NULL.
    query(c, "START TRANSACTION")
    query(c, "INSERT INTO q VALUES (40)")
    assert sorted(query(c, "SELECT qid, v FROM q"), key=lambda r: r[1]) == [(3, 30), (None, 40)]
    query(c, "COMMIT")
    assert query(c, "SELECT qid, v FROM q") == [(3, 30), (4, 40)]
    for expected in (3, 4):
        assert value(consumer, "SELECT queue_wait('test.q', 0)") == 1
        assert owned_row_id(consumer, column="qid") == (expected, expected)
    assert value(consumer, "SELECT queue_end()") == 1
    assert query(c, "SELECT qid FROM q") == []


# ---- 2. INSERT --------------------------------------------------------------------------------

@pytest.mark.parametrize("column", [NULLABLE, NOT_NULL], ids=["nullable", "not-null"])
def test_an_insert_gets_the_next_id_or_the_id_it_asks(any_server, column):
    s = any_server
    c = s.connect()
    query(c, f"CREATE TABLE q (v INT, {column}) ENGINE=QUEUE ROW_ID_COLUMN='qid'")
    assert _insert_for_id(c, v=1) == 1  # omitted
    assert _insert_for_id(c, v=2, asked=0) == 2
    assert _insert_for_id(c, v=3) == 3
    if column == NULLABLE:
        query(c, "INSERT INTO q (v, qid) VALUES (30, NULL)")
        assert value(c, "SELECT qid FROM q WHERE v = 30") == 4
    else:
        assert _insert_for_id(c, v=30, asked=0) == 4
    assert _insert_for_id(c, v=4, asked=10) == 10  # above the next id (5): kept
    assert _insert_for_id(c, v=5) == 11  # and the next rows go on from there
    _expect_refused_id(c, "INSERT INTO q (v, qid) VALUES (6, 11)", 11)  # given out already
    _expect_refused_id(c, "INSERT INTO q (v, qid) VALUES (6, 7)", 7)  # never given, but below
    assert _insert_for_id(c, v=6, asked=12) == 12  # the next id itself
    # Multi-row: each ascending asked id kept, the rows between go on from the one before.
    query(c, "INSERT INTO q (v, qid) VALUES (7, 20), (8, 0), (9, 30), (10, 0), (11, 0)")
    assert _rows(s) == [(1, 1), (2, 2), (3, 3), (4, 30), (10, 4), (11, 5), (12, 6),
                        (20, 7), (21, 8), (30, 9), (31, 10), (32, 11)]
    # In a transaction with an InnoDB row.
    query(c, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB")
    query(c, "START TRANSACTION")
    query(c, "INSERT INTO t VALUES (1)")
    query(c, "INSERT INTO q (v, qid) VALUES (12, 50)")
    query(c, "INSERT INTO q (v) VALUES (13)")
    query(c, "COMMIT")
    assert query(c, "SELECT id FROM t") == [(1,)]
    assert _rows(s)[-2:] == [(50, 12), (51, 13)]
    # Consuming rows does not give their ids out again.
    consumer = s.connect()
    while value(consumer, "SELECT queue_wait('test.q', 0)") == 1:
        pass
    assert value(consumer, "SELECT queue_end()") == 1
    assert _rows(s) == []
    _expect_refused_id(c, "INSERT INTO q (v, qid) VALUES (14, 51)", 51)
    assert _insert_for_id(c, v=14) == 52
    _assert_column_is_the_row_id(s)


# ---- 3. bad options -----------------------------------------------------------------------------

@pytest.mark.parametrize("definition,fragments", [
    ("(v INT) ENGINE=QUEUE ROW_ID_COLUMN='nope'", ["nope"]),
    ("(v INT, qid INT) ENGINE=QUEUE ROW_ID_COLUMN='qid'", []),
    ("(v INT, qid INT UNSIGNED) ENGINE=QUEUE ROW_ID_COLUMN='qid'", []),
    ("(v INT, qid BIGINT) ENGINE=QUEUE ROW_ID_COLUMN='qid'", []),
    ("(v INT, qid VARCHAR(20)) ENGINE=QUEUE ROW_ID_COLUMN='qid'", []),
    ("(v INT, qid BIGINT UNSIGNED) ENGINE=QUEUE ROW_ID_COLUMN='qid' DEDUP_COLUMN='qid'", []),
    ("(v INT, qid BIGINT UNSIGNED) ENGINE=QUEUE ROW_ID_COLUMN='qid' MESSAGE_GROUP_COLUMN='qid'", []),
], ids=["no-such-column", "int", "int-unsigned", "signed-bigint", "varchar", "dedup-column", "message-group-column"])
def test_a_bad_row_id_column_is_refused_at_create(server, definition, fragments):
    c = server.connect()
    expect_error(c, f"CREATE TABLE test.j {definition}", "test.j", "ROW_ID_COLUMN", *fragments,
                 code=ER_ILLEGAL_HA_CREATE_OPTION)
    assert query(c, "SHOW TABLES LIKE 'j'") == []


def test_good_row_id_columns_are_taken(server):
    """The counterpart of the refusals: nullable or not, visible or not."""
    c = server.connect()
    for n, column in enumerate([NULLABLE, NOT_NULL, "qid BIGINT UNSIGNED", "qid BIGINT UNSIGNED NOT NULL"]):
        query(c, f"CREATE TABLE t{n} (v INT, {column}) ENGINE=QUEUE ROW_ID_COLUMN='qid'")
        assert _insert_for_id(c, f"t{n}", v=1, asked=0) == 1
        assert _insert_for_id(c, f"t{n}", v=2, asked=9) == 9
        assert _insert_for_id(c, f"t{n}", v=3, asked=0) == 10


# ---- 4. SHOW CREATE TABLE -----------------------------------------------------------------------

def test_show_create_table_shows_the_next_id(server):
    c, other, consumer = server.connect(), server.connect(), server.connect()
    query(c, ROW_ID_TABLE)
    assert _auto_increment(c) is None  # N = 1
    query(c, "INSERT INTO q VALUES (1), (2), (3)")
    assert _auto_increment(c) == 4
    while value(consumer, "SELECT queue_wait('test.q', 0)") == 1:
        pass
    assert value(consumer, "SELECT queue_end()") == 1
    assert query(c, "SELECT COUNT(*) FROM q") == [(0,)]
    assert _auto_increment(c) == 4  # all consumed: still the next id
    query(c, "INSERT INTO q (v, qid) VALUES (4, 10)")
    assert _auto_increment(c) == 11
    query(c, "DELETE FROM q")
    assert _auto_increment(c) == 11
    # In a consistent snapshot: the N of its point.
    query(c, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
    query(other, "INSERT INTO q VALUES (5), (6)")
    query(other, "INSERT INTO q (v, qid) VALUES (7, 40)")
    assert _auto_increment(other) == 41
    assert _auto_increment(c) == 11
    assert query(c, "SELECT qid FROM q") == []
    query(c, "COMMIT")
    assert _auto_increment(c) == 41
    assert query(c, "SELECT qid, v FROM q") == [(11, 5), (12, 6), (40, 7)]


# ---- 5. AUTO_INCREMENT -------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["none", "copying-alter", "compaction", "truncate", "restart"])
def test_show_create_table_shows_auto_increment_whenever_it_was_set(any_server, server_factory, op):
    """Issue 40 item 8: a plain table's AUTO_INCREMENT=N was honoured but SHOW CREATE TABLE hid
    it, so a dump lost it. Shown (the id the next row gets) once set, across ALTER,
    compaction and TRUNCATE, and across a restart while no row has reached the start (the
    file keeps the start only until then: after rows passed it and a restart, a plain table
    shows none again, docs/sql-api.md); a table never given one shows none, as before."""
    s = any_server if op != "restart" else server_factory.new(at_startup=True)
    try:
        c = s.connect()
        query(c, "CREATE TABLE q (v INT) ENGINE=QUEUE AUTO_INCREMENT=1000")
        query(c, "CREATE TABLE plain (v INT) ENGINE=QUEUE")
        assert _auto_increment(c) == 1000
        if op == "restart":  # while no row has reached the start yet (see the docstring)
            s.restart()
            c = s.connect()
            assert _auto_increment(c) == 1000
        query(c, "INSERT INTO q VALUES (1), (2)")
        query(c, "INSERT INTO plain VALUES (1), (2)")
        assert _auto_increment(c) == 1002
        assert _auto_increment(c, "plain") is None
        if op == "compaction":
            _compact(c, 1)
        elif op == "copying-alter":
            OPERATIONS[op](c, 1)
            query(c, "ALTER TABLE plain ADD COLUMN w INT")
        elif op in OPERATIONS:
            OPERATIONS[op](c, 1)
        assert _auto_increment(c) == 1002
        assert _auto_increment(c, "plain") is None
        # What a dump does with it: the table made from SHOW CREATE TABLE starts there.
        ddl = query(c, "SHOW CREATE TABLE q")[0][1].replace("CREATE TABLE `q`", "CREATE TABLE `q2`")
        query(c, ddl)
        assert _auto_increment(c, "q2") == 1002
        assert _next_plain_id(c, "q2", 1) == 1002
        query(c, "ALTER TABLE q AUTO_INCREMENT=5000")
        assert _auto_increment(c) == 5000
    finally:
        if op == "restart":
            s.destroy()


@pytest.mark.parametrize("with_column", [True, False], ids=["row-id-column", "plain"])
def test_auto_increment_sets_where_the_ids_of_rows_that_ask_none_start(any_server, with_column):
    s = any_server
    c, consumer = s.connect(), s.connect()
    if not with_column:
        query(c, "CREATE TABLE q (v INT) ENGINE=QUEUE AUTO_INCREMENT=100")
        assert [_next_plain_id(c, "q", v) for v in (1, 2)] == [100, 101]
        query(c, "ALTER TABLE q AUTO_INCREMENT=500")
        assert _next_plain_id(c, "q", 3) == 500
        query(c, "ALTER TABLE q AUTO_INCREMENT=50")  # never lowers it
        assert _next_plain_id(c, "q", 4) == 501
        for expected in ((1, 100), (2, 101), (3, 500), (4, 501)):
            assert value(consumer, "SELECT queue_wait('test.q', 0)") == 1
            assert owned_row_id(consumer) == expected
        assert value(consumer, "SELECT queue_end()") == 1
        return
    query(c, f"CREATE TABLE q (v INT, {NULLABLE}) ENGINE=QUEUE ROW_ID_COLUMN='qid' AUTO_INCREMENT=100")
    assert _auto_increment(c) == 100
    assert _insert_for_id(c, v=1, asked=5) == 5  # below 100, at least the next id: kept
    assert _insert_for_id(c, v=2, asked=7) == 7
    assert _auto_increment(c) == 100
    assert _insert_for_id(c, v=3) == 100
    assert _insert_for_id(c, v=4) == 101
    _expect_refused_id(c, "INSERT INTO q (v, qid) VALUES (9, 50)", 50)
    query(c, "ALTER TABLE q AUTO_INCREMENT=500")
    assert _auto_increment(c) == 500
    assert _insert_for_id(c, v=5) == 500
    query(c, "ALTER TABLE q AUTO_INCREMENT=50")  # never lowers it
    assert _auto_increment(c) == 501
    assert _insert_for_id(c, v=6) == 501
    assert _auto_increment(c) == 502
    assert _rows(s) == [(5, 1), (7, 2), (100, 3), (101, 4), (500, 5), (501, 6)]
    _assert_column_is_the_row_id(s)
    for expected in (5, 7, 100, 101, 500, 501):
        assert value(consumer, "SELECT queue_wait('test.q', 0)") == 1
        assert owned_row_id(consumer, column="qid") == (expected, expected)
    assert value(consumer, "SELECT queue_end()") == 1


def _compact(c, n):
    assert value(c, "SELECT queue_compact('test.q')") == 1


OPERATIONS = {
    "copying-alter": lambda c, n: query(c, f"ALTER TABLE q ADD COLUMN w{n} INT"),
    "compaction": _compact,
    "truncate": lambda c, n: query(c, "TRUNCATE TABLE q"),
}


@pytest.mark.parametrize("op", list(OPERATIONS))
@pytest.mark.parametrize("with_column", [True, False], ids=["row-id-column", "plain"])
def test_auto_increment_survives_alter_compaction_and_truncate(server, op, with_column):
    """The start set by CREATE TABLE, then the one set by ALTER TABLE ... AUTO_INCREMENT, each
    holds after the operation, for rows that ask no id."""
    c = server.connect()
    if not with_column:
        query(c, "CREATE TABLE q (v INT) ENGINE=QUEUE AUTO_INCREMENT=100")
        OPERATIONS[op](c, 1)
        assert _next_plain_id(c, "q", 1) == 100
        query(c, "ALTER TABLE q AUTO_INCREMENT=300")
        OPERATIONS[op](c, 2)
        assert _next_plain_id(c, "q", 2) == 300
        return
    query(c, f"CREATE TABLE q (v INT, {NULLABLE}) ENGINE=QUEUE ROW_ID_COLUMN='qid' AUTO_INCREMENT=100")
    query(c, "INSERT INTO q (v, qid) VALUES (1, 5), (2, 7)")
    query(c, "DELETE FROM q WHERE qid = 5")  # something for compaction to drop
    OPERATIONS[op](c, 1)
    assert _insert_for_id(c, v=3) == 100
    assert _rows(server) == ([] if op == "truncate" else [(7, 2)]) + [(100, 3)]
    query(c, "ALTER TABLE q AUTO_INCREMENT=300")
    query(c, "DELETE FROM q WHERE qid = 7")
    OPERATIONS[op](c, 2)
    assert _auto_increment(c) == 300
    assert _insert_for_id(c, v=4) == 300
    assert _rows(server) == ([] if op == "truncate" else [(100, 3)]) + [(300, 4)]
    _assert_column_is_the_row_id(server)


def test_auto_increment_survives_a_restart_and_a_kill_9(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.a (v INT) ENGINE=QUEUE AUTO_INCREMENT=100")
    s.sql(f"CREATE TABLE test.q (v INT, {NULLABLE}) ENGINE=QUEUE ROW_ID_COLUMN='qid' AUTO_INCREMENT=100")
    s.sql("INSERT INTO test.q (v, qid) VALUES (1, 5)")
    s.restart()
    c = s.connect()
    assert _auto_increment(c) == 100
    assert _next_plain_id(c, "a", 1) == 100
    assert _insert_for_id(c, v=2) == 100
    query(c, "ALTER TABLE a AUTO_INCREMENT=500")
    query(c, "ALTER TABLE q AUTO_INCREMENT=500")
    query(c, f"CREATE TABLE b (v INT, {NULLABLE}) ENGINE=QUEUE ROW_ID_COLUMN='qid' AUTO_INCREMENT=300")
    s.restart(kill=True)
    c = s.connect()
    assert _auto_increment(c) == 500 and _auto_increment(c, "b") == 300
    assert _next_plain_id(c, "a", 2) == 500
    assert _insert_for_id(c, v=3) == 500
    assert _insert_for_id(c, "b", v=1) == 300
    assert _rows(s) == [(5, 1), (100, 2), (500, 3)]


# ---- 6. restarts -------------------------------------------------------------------------------

@pytest.mark.parametrize("binlog", [False, True], ids=["binlog-off", "binlog-on"])
def test_ids_and_the_column_survive_a_restart_and_a_kill_9(server_factory, binlog):
    s = server_factory.new(extra_args=BINLOG_ARGS if binlog else ["--skip-log-bin"], at_startup=True)
    try:
        c = s.connect()
        query(c, ROW_ID_TABLE)
        query(c, "CREATE TABLE test.t (id INT PRIMARY KEY) ENGINE=InnoDB")
        query(c, "INSERT INTO q VALUES (1), (2), (3)")
        query(c, "INSERT INTO q (v, qid) VALUES (4, 10)")

        def in_transaction(v, asked=None):  # with an InnoDB row
            query(c, "START TRANSACTION")
            query(c, "INSERT INTO t VALUES (%s)", (v,))
            query(c, "INSERT INTO q (v, qid) VALUES (%s, %s)", (v, asked))
            query(c, "COMMIT")

        in_transaction(5)
        in_transaction(6, 20)
        assert value(c, "SELECT queue_wait('test.q', 0)") == 1
        assert value(c, "SELECT queue_end()") == 1  # row 1 consumed
        expected = [(2, 2), (3, 3), (10, 4), (11, 5), (20, 6)]
        assert _rows(s) == expected
        s.restart()
        assert _rows(s) == expected
        _assert_column_is_the_row_id(s)
        c = s.connect()
        assert _insert_for_id(c, v=7) == 21
        in_transaction(8)
        in_transaction(9, 30)
        expected += [(21, 7), (22, 8), (30, 9)]
        s.restart(kill=True)
        assert _rows(s) == expected
        _assert_column_is_the_row_id(s)
        if binlog:  # all or nothing across a crash only with the binary log coordinating
            # (docs/transactions.md: without it MariaDB's tc.log recovery may roll back the InnoDB half)
            assert s.sql("SELECT id FROM test.t ORDER BY id") == [(5,), (6,), (8,), (9,)]
        c = s.connect()
        assert _insert_for_id(c, v=10) == 31
        _expect_refused_id(c, "INSERT INTO q (v, qid) VALUES (11, 30)", 30)
        assert value(c, "SELECT qid FROM q WHERE queue_wait('test.q', 0)") == 2
        assert value(c, "SELECT queue_rowid()") == 2
    finally:
        s.destroy()


# ---- 7. mariadb-dump ---------------------------------------------------------------------------

@pytest.mark.parametrize("options", [[], ["--single-transaction"]], ids=["default", "single-transaction"])
def test_a_dump_restores_the_ids_and_the_next_id(server, server_factory, options):
    restored = server_factory.new(extra_args=BINLOG_ARGS, at_startup=True)
    try:
        c = server.connect()
        query(c, ROW_ID_TABLE)
        query(c, "INSERT INTO q VALUES (1), (2), (3), (4), (5)")
        query(c, "INSERT INTO q (v, qid) VALUES (6, 40)")
        query(c, "INSERT INTO q VALUES (7)")
        query(c, "INSERT INTO q (v, qid) VALUES (8, 60)")
        assert value(c, "SELECT queue_wait('test.q', 0)") == 1
        assert value(c, "SELECT queue_end()") == 1
        query(c, "DELETE FROM q WHERE qid IN (2, 60)")  # the last id given out, 60, is gone
        original = _rows(server)
        assert original == [(3, 3), (4, 4), (5, 5), (40, 6), (41, 7)]
        assert _auto_increment(c) == 61
        _restore(restored, _dump(server, *options))
        assert _rows(restored) == original
        _assert_column_is_the_row_id(restored)
        r = restored.connect()
        assert _auto_increment(r) == 61
        assert _insert_for_id(c, v=9) == 61
        assert _insert_for_id(r, v=9) == 61
        assert _rows(restored) == _rows(server)
        assert value(r, "SELECT qid FROM q WHERE queue_wait('test.q', 0)") == 3
        assert value(r, "SELECT queue_rowid()") == 3
        assert value(r, "SELECT queue_end()") == 1
    finally:
        restored.destroy()


# ---- 8. a replica seeded from a dump taken under load -------------------------------------------

def _noting_errors(errors, fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 (reported by the test)
        errors.append(e)


def _consume_in_transactions(server, stop, limit):
    """Takes and ends up to `limit` rows, each in a transaction of its own."""
    c = server.connect()
    taken = 0
    while taken < limit and not stop.is_set():
        taken += len(consume_job(c, in_transaction=True))


def _seq(gtid):
    return int(gtid.split("-")[-1])


def _slave_status(server):
    with server.admin().cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW SLAVE STATUS")
        return cur.fetchone()


def _wait_caught_up(primary, replica):
    """Waits until the replica applied everything the primary logged so far; fails at once if
    its applier stopped meanwhile."""
    pos = primary.value("SELECT @@gtid_binlog_pos")

    def reached():
        st = _slave_status(replica)
        assert st["Slave_SQL_Running"] == "Yes" and st["Last_SQL_Errno"] == 0, f"the applier stopped: {st}"
        return replica.value("SELECT MASTER_GTID_WAIT(%s, 1)", (pos,)) == 0

    wait_until(reached, timeout=SYNC_TIMEOUT_S, what=f"the replica to reach {pos}")


def test_a_replica_seeded_from_a_dump_taken_under_load_keeps_the_primarys_ids(server_factory):
    """mariadb-dump --single-transaction --gtid --master-data=2 of a primary (binary log on)
    while producers insert (some in transactions with an InnoDB row) and consumers consume, one
    of them holding a row across the dump point; restored into a fresh server that then
    replicates from the dump's GTID position: after the load, the replica holds the primary's
    rows under the primary's ids, and its applier (which removes rows by id) never stopped."""
    port = _free_port()
    primary = server_factory.new(extra_args=["--skip-networking=0", "--bind-address=127.0.0.1", f"--port={port}",
                                             *BINLOG_ARGS], at_startup=True)
    replica = None
    stop, errors, workers = threading.Event(), [], []
    try:
        replica = server_factory.new(extra_args=["--server-id=2", "--log-bin=bin", "--log-slave-updates",
                                                 "--relay-log=relay", "--binlog-format=ROW"], at_startup=True)
        primary.sql("CREATE USER repl@'127.0.0.1' IDENTIFIED BY 'repl'")
        primary.sql("GRANT REPLICATION SLAVE ON *.* TO repl@'127.0.0.1'")
        primary.sql("CREATE TABLE test.jobs (producer INT NOT NULL, seq INT NOT NULL, qid BIGINT UNSIGNED INVISIBLE) "
                    "ENGINE=QUEUE ROW_ID_COLUMN='qid'")
        primary.sql("CREATE TABLE test.orders (producer INT, seq INT, PRIMARY KEY (producer, seq)) ENGINE=InnoDB")
        start = _seq(primary.value("SELECT @@gtid_binlog_pos"))
        workers = [threading.Thread(target=_noting_errors, args=(errors, _load, primary, p, stop)) for p in range(3)]
        # _load consumes at most one row for every two it inserts, and this consumer 50 rows:
        # with 600 logged transactions the queue keeps more than 50 rows, whatever the timing.
        workers.append(threading.Thread(target=_noting_errors,
                                        args=(errors, _consume_in_transactions, primary, stop, 50)))
        for w in workers:
            w.start()
        wait_until(lambda: _seq(primary.value("SELECT @@gtid_binlog_pos")) > start + 300, timeout=60,
                   what="the load to commit 300 transactions")
        holder = primary.connect()  # a row held across the dump point, whose end comes after it
        held = query(holder, "SELECT qid, producer, seq FROM jobs WHERE queue_wait('jobs', 5)")
        assert held, "no row to hold"
        dump = _dump(primary, "--single-transaction", "--gtid", "--master-data=2")
        assert value(holder, "SELECT queue_end()") == 1
        m = re.search(rb"gtid_slave_pos='([^']+)'", dump)
        assert m, dump[:3000].decode(errors="replace")
        gtid = m.group(1).decode()
        # The load goes on after the dump point: the replica has inserts and removals to apply.
        wait_until(lambda: _seq(primary.value("SELECT @@gtid_binlog_pos")) > _seq(gtid) + 300, timeout=60,
                   what="the load to commit 300 transactions after the dump")
        _restore(replica, dump)
        assert held[0] in replica.sql("SELECT qid, producer, seq FROM test.jobs"), "the held row is not in the dump"
        _assert_column_is_the_row_id(replica, "jobs")
        replica.sql("RESET MASTER")  # the restore's own transactions
        replica.sql("SET GLOBAL gtid_slave_pos = %s", (gtid,))
        replica.sql("SET GLOBAL read_only = ON")
        replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                    "MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1")
        replica.sql("START SLAVE")
        threading.Event().wait(0.5)  # some load while the replica applies, too
        stop.set()
        for w in workers:
            w.join(60)
        assert not any(w.is_alive() for w in workers), "a load thread did not stop"
        assert not errors, errors
        _wait_caught_up(primary, replica)
        ids = "SELECT qid, producer, seq FROM test.jobs ORDER BY qid"
        on_primary = primary.sql(ids)
        assert len(on_primary) > 50, len(on_primary)
        on_replica = replica.sql(ids)
        if on_replica != on_primary:
            first = next((i for i, (a, b) in enumerate(zip(on_replica, on_primary)) if a != b),
                         min(len(on_replica), len(on_primary)))
            raise AssertionError(f"the replica's rows differ from the primary's from row {first}: "
                                 f"{on_replica[first:first + 5]} against {on_primary[first:first + 5]} "
                                 f"({len(on_replica)} rows against {len(on_primary)})")
        assert held[0] not in on_replica
        _assert_column_is_the_row_id(primary, "jobs")
        _assert_column_is_the_row_id(replica, "jobs")
        orders = "SELECT producer, seq FROM test.orders ORDER BY producer, seq"
        assert replica.sql(orders) == primary.sql(orders)
        # Every row consumed on the primary (removed there by id, length and checksum) and one
        # more inserted: the replica removes the same rows and gives the new one the same id.
        c = primary.connect()
        while value(c, "SELECT queue_wait('test.jobs', 0)") == 1:
            pass
        assert value(c, "SELECT queue_end()") == 1
        query(c, "INSERT INTO test.jobs VALUES (99, 1)")
        _wait_caught_up(primary, replica)
        assert replica.sql(ids) == primary.sql(ids)
        assert len(primary.sql(ids)) == 1 and primary.sql(ids)[0][0] > on_primary[-1][0]
    finally:
        stop.set()
        for w in workers:
            if w.ident is not None:  # started
                w.join(60)
        if replica is not None:
            replica.destroy()
        primary.destroy()


def test_a_condition_on_the_row_id_column_is_refused(server):
    """A row stores 0 in its ROW_ID_COLUMN (the id is not in its bytes): a condition would read
    0, so queue_wait() refuses one naming that column; other columns still filter."""
    server.sql(ROW_ID_TABLE)
    server.sql("INSERT INTO test.q (v) VALUES (1), (2)")
    c = server.connect()
    expect_error(c, "SELECT queue_wait('test.q:qid = 2', 0)", "test.q", "column 'qid' is the table's ROW_ID_COLUMN")
    assert value(c, "SELECT queue_wait('test.q:v = 2', 0)") == 1
    assert query(c, "SELECT qid, v FROM test.q") == [(2, 2)]
    assert value(c, "SELECT queue_end()") == 1


def test_an_alter_adds_the_column_to_a_table_whose_rows_keep_their_ids(server):
    """ALTER TABLE ... ADD qid ..., ROW_ID_COLUMN='qid' copies the rows, which keep their ids, and
    the column reads them; ALTER TABLE ... ENGINE=InnoDB keeps the ids as the column's values."""
    server.sql("CREATE TABLE test.p (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.p VALUES (1), (2), (3), (4)")
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.p', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1  # row 1 consumed: ids 2, 3, 4 stay
    before = server.sql("SELECT queue_scan_rowid(), v FROM test.p")
    assert [i for i, _ in before] == [2, 3, 4]
    server.sql("ALTER TABLE test.p ADD qid BIGINT UNSIGNED INVISIBLE, ROW_ID_COLUMN='qid'")
    assert server.sql("SELECT qid, v FROM test.p") == before
    _assert_column_is_the_row_id(server, "p")
    server.sql("INSERT INTO test.p (v) VALUES (5)")
    assert server.sql("SELECT qid, v FROM test.p")[-1] == (5, 5)
    server.sql("ALTER TABLE test.p ENGINE=InnoDB")
    assert server.sql("SELECT qid, v FROM test.p ORDER BY qid") == before + [(5, 5)]


def test_a_copying_alter_of_a_row_id_table_keeps_or_renews_ids_as_without_the_column(server):
    """ALTER TABLE ... ORDER BY gives the rows new ids (as for any QUEUE table, with a note), which
    the column then reads, instead of failing on the old ids it read in another order; a table of
    another engine whose column holds increasing ids keeps them as row ids when it becomes a queue."""
    server.sql(ROW_ID_TABLE)
    server.sql("INSERT INTO test.q (v, qid) VALUES (1, 10), (2, 20), (3, 30)")
    server.sql("ALTER TABLE test.q ORDER BY v DESC")
    rows = server.sql("SELECT qid, v FROM test.q")
    assert [v for _, v in rows] == [3, 2, 1] and [i for i, _ in rows] == [31, 32, 33], rows
    _assert_column_is_the_row_id(server)
    server.sql("CREATE TABLE test.i (v INT, qid BIGINT UNSIGNED) ENGINE=InnoDB")
    server.sql("INSERT INTO test.i VALUES (1, 10), (2, 20), (3, 15)")
    server.sql("ALTER TABLE test.i ENGINE=QUEUE ROW_ID_COLUMN='qid'")
    assert server.sql("SELECT qid, v FROM test.i") == [(10, 1), (20, 2), (21, 3)]  # 15 < 21: the next id
    _assert_column_is_the_row_id(server, "i")
