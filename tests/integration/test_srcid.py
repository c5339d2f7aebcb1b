"""queue_set_srcid(): relay dedup, also across a crash (the original lost this state in recovery)."""
import pytest

from binlog_modes import both_binlog_modes

# An INSERT is one transaction with the binary log on or off (issue 42, one write path): its
# relayed rows are admitted together at its commit, and a note's "last received" is the
# source's record before the statement. These tests pin that text in both modes.

from sqlcheck import expect_error, query, value


def _relay(c, source, mode, rowid, v):
    assert value(c, "SELECT queue_set_srcid(%s, %s, %s)", (source, mode, rowid)) == 1
    query(c, "INSERT INTO test.q VALUES (%s)", (v,))


def _values(server):
    return [r[0] for r in server.sql("SELECT v FROM test.q")]


def test_relayed_rows_are_deduplicated(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    _relay(c, 1, "a", 10, 1)
    _relay(c, 1, "a", 10, 2)   # same id: dropped
    _relay(c, 1, "a", 9, 3)    # older: dropped
    _relay(c, 1, "a", 11, 4)
    _relay(c, 2, "a", 1, 5)    # another source has its own record
    query(c, "INSERT INTO test.q VALUES (6)")  # a plain insert is never deduplicated
    _relay(c, 1, "w", 3, 7)    # reset: accepted although older
    _relay(c, 1, "a", 3, 8)    # ...and the reset record applies from then on
    assert _values(server) == [1, 4, 5, 6, 7]


def test_srcid_applies_to_the_next_insert_only(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    _relay(c, 1, "a", 5, 1)
    assert value(c, "SELECT queue_set_srcid(1, 'a', 5)") == 1
    query(c, "INSERT INTO test.q VALUES (2)")   # dropped: not newer
    query(c, "INSERT INTO test.q VALUES (3)")   # plain insert again
    assert _values(server) == [1, 3]


def test_srcid_is_per_connection(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    a, b = server.connect(), server.connect()
    _relay(a, 1, "a", 5, 1)
    assert value(b, "SELECT queue_set_srcid(1, 'a', 5)") == 1
    query(a, "INSERT INTO test.q VALUES (2)")  # a's srcid was used up; b's does not apply to a
    assert _values(server) == [1, 2]


@pytest.mark.parametrize("kill", [False, True], ids=["clean-restart", "kill9"])
def test_dedup_record_survives_restart(fresh_server, kill):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = s.connect()
    _relay(c, 1, "a", 100, 1)
    _relay(c, 2, "a", 7, 2)
    s.restart(kill=kill)
    c = s.connect()
    _relay(c, 1, "a", 100, 3)  # dropped: the record was rebuilt
    _relay(c, 2, "a", 6, 4)    # dropped
    _relay(c, 1, "a", 101, 5)
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == [1, 2, 5]


def test_dedup_record_survives_compaction_and_crash(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = s.connect()
    for i in range(1, 51):
        _relay(c, 1, "a", i, i)
    while value(c, "SELECT queue_wait('q', 0)") == 1:
        pass  # consume everything: the rows carrying the record are gone
    assert value(c, "SELECT queue_compact('q')") == 1
    s.restart(kill=True)
    c = s.connect()
    _relay(c, 1, "a", 50, 99)  # dropped
    _relay(c, 1, "a", 51, 51)
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == [51]


# ---- a list of row ids: one relayed batch per INSERT (q4m-forward --batch) ----

def _relay_batch(c, source, ids, values):
    args = ", ".join(str(i) for i in ids)
    assert value(c, f"SELECT queue_set_srcid({source}, 'a', {args})") == 1
    rows = ", ".join("(%s)" for _ in values)
    query(c, f"INSERT INTO test.q VALUES {rows}", tuple(values))


def _notes(c):
    return [r[2] for r in query(c, "SHOW WARNINGS")]


@both_binlog_modes
def test_a_list_of_row_ids_drops_the_received_prefix(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    _relay_batch(c, 1, [3, 5, 8], [3, 5, 8])
    assert _notes(c) == []
    # The source gave the batch back (a relay restart) and newer rows came after it.
    _relay_batch(c, 1, [3, 5, 8, 9, 12], [3, 5, 8, 9, 12])
    assert _notes(c) == ["queue_set_srcid: 3 of 5 rows of source 1 were already received by "
                         "'test.q' (row ids 3 to 8); dropped (last received: row 8)"]
    _relay_batch(c, 1, [12, 13], [12, 13])
    assert _notes(c) == ["queue_set_srcid: 1 of 2 rows of source 1 were already received by "
                         "'test.q' (row ids 12 to 12); dropped (last received: row 12)"]
    assert _values(server) == [3, 5, 8, 9, 12, 13]


def test_rows_after_the_declared_ones_are_plain_rows(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    assert value(c, "SELECT queue_set_srcid(1, 'a', 1, 2)") == 1
    query(c, "INSERT INTO test.q VALUES (1), (2), (3)")
    _relay_batch(c, 1, [1, 2], [10, 20])  # both dropped; the plain row 3 did not move the record
    assert _values(server) == [1, 2, 3]


def test_ids_without_a_row_are_not_recorded(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    assert value(c, "SELECT queue_set_srcid(1, 'a', 1, 2, 3)") == 1
    query(c, "INSERT INTO test.q VALUES (1), (2)")
    assert _notes(c) == ["queue_set_srcid: 1 of 3 declared source row ids had no row in this INSERT into "
                         "'test.q'; they were not recorded"]
    # Source row 3 never arrived: it is accepted when it does; row 2 is not.
    _relay_batch(c, 1, [2, 3], [20, 3])
    assert value(c, "SELECT queue_set_srcid(1, 'a', 4, 5)") == 1
    query(c, "INSERT INTO test.q VALUES (4)")  # one row: written at once with its id
    assert _notes(c) == ["queue_set_srcid: 1 of 2 declared source row ids had no row in this INSERT into "
                         "'test.q'; they were not recorded"]
    _relay_batch(c, 1, [4, 5], [40, 5])
    query(c, "INSERT INTO test.q VALUES (6)")  # the declaration was used up: a plain row
    assert _values(server) == [1, 2, 3, 4, 5, 6]


@both_binlog_modes
def test_a_table_with_triggers_relays_its_rows_as_one_batch(server):
    # The server uses no bulk insert when triggers run; the rows still commit together.
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.seen (v INT)")
    server.sql("CREATE TRIGGER test.q_seen BEFORE INSERT ON test.q FOR EACH ROW INSERT INTO test.seen VALUES (NEW.v)")
    c = server.connect()
    _relay_batch(c, 1, [1, 2, 3], [1, 2, 3])
    _relay_batch(c, 1, [2, 3, 4], [2, 3, 4])
    assert _notes(c) == ["queue_set_srcid: 2 of 3 rows of source 1 were already received by 'test.q' "
                         "(row ids 2 to 3); dropped (last received: row 3)"]
    assert _values(server) == [1, 2, 3, 4]
    assert [r[0] for r in server.sql("SELECT v FROM test.seen")] == [1, 2, 3, 2, 3, 4]
    _relay_batch(c, 1, [4, 5], [4, 5])
    assert _notes(c) == ["queue_set_srcid: 1 of 2 rows of source 1 were already received by 'test.q' "
                         "(row ids 4 to 4); dropped (last received: row 4)"]
    assert _values(server) == [1, 2, 3, 4, 5]


@both_binlog_modes
def test_a_failing_insert_keeps_none_of_its_rows(server):
    # An INSERT is a transaction of its own: a row that fails takes the rows before it back,
    # and their ids are not recorded (the same rows relayed again are taken, no replay note).
    server.sql("CREATE TABLE test.q (v INT, s VARCHAR(3)) ENGINE=QUEUE")
    c = server.connect()
    query(c, "SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
    assert value(c, "SELECT queue_set_srcid(1, 'a', 1, 2, 3)") == 1
    expect_error(c, "INSERT INTO test.q VALUES (1, 'a'), (2, 'too long'), (3, 'c')", "Data too long")
    assert value(c, "SELECT queue_set_srcid(1, 'a', 1, 2, 3)") == 1
    query(c, "INSERT INTO test.q VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    assert _notes(c) == []
    assert [r[0] for r in server.sql("SELECT v FROM test.q")] == [1, 2, 3]


@pytest.mark.parametrize("sql, fragments", [
    ("SELECT queue_set_srcid(1, 'a', 5, 5)", ["argument 4", "row ids must increase (5 after 5)"]),
    ("SELECT queue_set_srcid(1, 'a', 5, 7, 6)", ["argument 5", "row ids must increase (6 after 7)"]),
    ("SELECT queue_set_srcid(1, 'a', 5, NULL)", ["argument 4", "rowid must be a row id"]),
    ("SELECT queue_set_srcid(1, 'a', 5, 0)", ["argument 4", "rowid must be a row id"]),
    ("SELECT queue_set_srcid(1, 'a')", ["takes 3 to 10002 arguments"]),
])
def test_bad_row_id_lists_are_refused(server, sql, fragments):
    c = server.connect()
    expect_error(c, sql, "queue_set_srcid()", *fragments)


@both_binlog_modes
def test_a_relayed_batch_and_its_record_survive_kill9(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = s.connect()
    _relay_batch(c, 1, list(range(1, 101)), list(range(1, 101)))
    s.restart(kill=True)
    c = s.connect()
    _relay_batch(c, 1, list(range(1, 103)), list(range(1, 103)))
    assert _notes(c) == ["queue_set_srcid: 100 of 102 rows of source 1 were already received by "
                         "'test.q' (row ids 1 to 100); dropped (last received: row 100)"]
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == list(range(1, 103))


@both_binlog_modes
def test_rows_relayed_in_a_transaction_commit_or_roll_back_with_it(server):
    """queue_set_srcid() inside BEGIN ... COMMIT (refused before): the relayed rows and the
    source's record take effect at the commit; a rollback leaves neither, so the same rows
    relayed again are taken; a replay is found at the commit, with its note."""
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    other = server.connect()
    query(c, "BEGIN")
    _relay_batch(c, 1, [1, 2], [1, 2])
    assert value(other, "SELECT COUNT(*) FROM test.q") == 0
    query(c, "ROLLBACK")
    assert _values(server) == []
    query(c, "BEGIN")
    _relay_batch(c, 1, [1, 2], [1, 2])
    query(c, "COMMIT")
    assert _notes(c) == []
    assert _values(server) == [1, 2]
    query(c, "BEGIN")
    _relay_batch(c, 1, [2, 3], [2, 3])
    query(c, "COMMIT")
    assert _notes(c) == ["queue_set_srcid: 1 of 2 rows of source 1 were already received by "
                         "'test.q' (row ids 2 to 2); dropped (last received: row 2)"]
    assert _values(server) == [1, 2, 3]


def test_a_prepared_relay_survives_kill9_and_counts_meanwhile(server_factory):
    """XA PREPARE of relayed rows, then kill -9: after the restart the prepared part still
    holds the source's record (TXN_SRCID), so a resend meanwhile is a replay; XA COMMIT then
    records it for good, and a clean restart keeps it."""
    s = server_factory.new(extra_args=["--log-bin=mysql-bin", "--server-id=1"], at_startup=True)
    try:
        s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
        c = s.connect()
        query(c, "XA START 'relay'")
        _relay_batch(c, 1, [5, 6], [5, 6])
        query(c, "XA END 'relay'")
        query(c, "XA PREPARE 'relay'")
        s.kill9()
        s.start()
        assert [bytes(r[3]) for r in s.sql("XA RECOVER")] == [b"relay"]
        c = s.connect()
        _relay_batch(c, 1, [6, 7], [6, 7])
        assert _notes(c) == ["queue_set_srcid: 1 of 2 rows of source 1 were already received by "
                             "'test.q' (row ids 6 to 6); dropped (last received: row 6)"]
        query(c, "XA COMMIT 'relay'")
        assert sorted(_values(s)) == [5, 6, 7]
        s.restart()
        c = s.connect()
        _relay_batch(c, 1, [7], [7])
        assert _notes(c) == ["queue_set_srcid: row 7 of source 1 was already received by 'test.q'; dropped "
                             "(last received: row 7)"]
        assert sorted(_values(s)) == [5, 6, 7]
    finally:
        s.destroy()
