"""A subscription's ends inside a transaction (issue 44): queue_end() of a row taken from
'tbl@sub' in BEGIN ... COMMIT (or XA) commits with the transaction's InnoDB rows, two-phase, and
a ROLLBACK gives the row back to that subscription only; kill -9 at any point of the commit keeps
both halves or neither, and a prepared XA part keeps the row held across a restart and a
compaction. Autocommit ends still commit at once. (core/table/subscriptions.cc, "Ends in a
transaction"; the prepared part's TXN_SUB_REMOVE record, docs/file-format.md.)"""
import pytest

from binlog_modes import both_binlog_modes
from sqlcheck import query, value


@pytest.fixture
def own_server(server_factory, binlog):
    """A server of its own (restarts), with QUEUE loaded at startup: with the binary log off only
    that gives it two-phase commit."""
    s = server_factory.new(at_startup=True, binlog=binlog)
    yield s
    s.destroy()


def _setup(server):
    server.sql("CREATE TABLE test.events (id INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.results (id INT PRIMARY KEY) ENGINE=InnoDB")
    assert server.value("SELECT queue_subscribe('test.events', 'a')") == 1
    assert server.value("SELECT queue_subscribe('test.events', 'b')") == 1


def _pending(server):
    return dict(server.sql(
        "SELECT SUBSCRIPTION_NAME, PENDING_ROWS FROM information_schema.QUEUE_SUBSCRIPTIONS "
        "WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'events'"))


def _consume_in_transaction(c, source="test.events@a"):
    """BEGIN, take a row of `source`, write its result to InnoDB, end it: the transaction is open."""
    query(c, "BEGIN")
    assert value(c, f"SELECT queue_wait('{source}', 0)") == 1
    row = value(c, "SELECT id FROM test.events")
    query(c, f"INSERT INTO test.results VALUES ({row})")
    assert value(c, "SELECT queue_end()") == 1
    return row


@both_binlog_modes
def test_a_rollback_gives_the_row_back_to_that_subscription_only(server, binlog):
    _setup(server)
    server.sql("INSERT INTO test.events VALUES (1)")
    c, other = server.connect(), server.connect()
    assert _consume_in_transaction(c) == 1
    # Held by the transaction: a's other consumers do not get it, b's do.
    assert value(other, "SELECT queue_wait('test.events@a', 0)") == 0
    assert value(other, "SELECT queue_wait('test.events@b', 0)") == 1
    query(c, "ROLLBACK")
    assert server.value("SELECT COUNT(*) FROM test.results") == 0
    # Back for a (as after queue_abort: delivered twice now); b's delivery goes on untouched.
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
    assert value(c, "SELECT queue_delivery_count()") == 2
    assert value(c, "SELECT queue_end()") == 1
    assert _pending(server) == {"a": 0, "b": 1}
    assert server.value("SELECT COUNT(*) FROM test.events") == 1  # b still owns it
    assert value(other, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.events") == 0


@both_binlog_modes
def test_a_commit_ends_the_row_with_the_innodb_row_and_removes_it_when_it_is_the_last(server, binlog):
    _setup(server)
    server.sql("INSERT INTO test.events VALUES (1), (2)")
    c = server.connect()
    # Row 1: a ends it in a transaction, b still needs it.
    assert _consume_in_transaction(c) == 1
    assert _pending(server)["a"] == 2  # not ended before the commit
    query(c, "COMMIT")
    assert server.sql("SELECT id FROM test.results") == [(1,)]
    assert _pending(server) == {"a": 1, "b": 2}
    assert server.value("SELECT COUNT(*) FROM test.events") == 2
    # b ends row 1 (autocommit: at once) and row 2; then a's transaction ends row 2, the last
    # subscription: its commit removes the row.
    assert value(c, "SELECT queue_wait('test.events@b', 0)") == 1
    assert value(c, "SELECT queue_wait('test.events@b', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.events") == 1
    assert _consume_in_transaction(c) == 2
    assert _pending(server) == {"a": 1, "b": 0}  # held by the transaction (and hidden, as a plain end's row)
    query(c, "COMMIT")
    assert server.sql("SELECT id FROM test.results ORDER BY id") == [(1,), (2,)]
    assert server.value("SELECT COUNT(*) FROM test.events") == 0
    assert _pending(server) == {"a": 0, "b": 0}


def _crash_server(server_factory, binlog):
    s = server_factory.new(extra_args=["--queue-debug-hooks=ON"], at_startup=True, binlog=binlog)
    _setup(s)
    s.sql("INSERT INTO test.events VALUES (7)")
    return s


# Each point of two-phase commit (docs/transactions.md, "Testing hook"): before the prepare the
# transaction is gone, from the coordinator's decision on it is there, both halves at once.
CRASH = [(True, "before_prepare"), (True, "after_prepare"), (True, "before_commit_record"), (True, "after_commit"),
         (False, "after_prepare"), (False, "before_commit")]


@pytest.mark.parametrize("binlog,point", CRASH, ids=[f"{'binlog' if b else 'no-binlog'}-{p}" for b, p in CRASH])
def test_a_subscription_consume_killed_at_any_point_of_its_commit_is_all_or_nothing(server_factory, binlog, point):
    s = _crash_server(server_factory, binlog)
    try:
        c = s.connect()
        query(c, f"SET GLOBAL queue_debug_crash_point = '{point}'")
        _consume_in_transaction(c)
        try:
            query(c, "COMMIT")
        except Exception:  # noqa: BLE001 - the server killed itself: that is the point
            pass
        s.kill9()
        s.start()
        results = s.value("SELECT COUNT(*) FROM test.results")
        pending_a = _pending(s)["a"]
        assert (results, pending_a) in [(0, 1), (1, 0)], f"{point}: results {results}, a's pending rows {pending_a}"
        if point == "before_prepare":
            assert results == 0
        if point in ("before_commit_record", "before_commit", "after_commit"):
            assert results == 1, f"{point}: a decided transaction was rolled back"
        assert s.sql("XA RECOVER") == []
        assert _pending(s)["b"] == 1  # b's row all along
        c = s.connect()
        assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1 - results
        query(c, "SELECT queue_end()")
    finally:
        s.destroy()


@both_binlog_modes
def test_kill9_after_commit_keeps_both_and_before_commit_neither(own_server, binlog):
    server = own_server
    _setup(server)
    server.sql("INSERT INTO test.events VALUES (1), (2)")
    c = server.connect()
    assert _consume_in_transaction(c) == 1
    query(c, "COMMIT")
    assert _consume_in_transaction(c) == 2  # open when the server dies
    server.restart(kill=True)
    assert server.sql("SELECT id FROM test.results") == [(1,)]
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
    assert value(c, "SELECT id FROM test.events") == 2
    assert value(c, "SELECT queue_end()") == 1
    assert _pending(server) == {"a": 0, "b": 2}


@both_binlog_modes
def test_prepared_xa_parts_hold_their_rows_across_kill9_and_compaction_until_xa_commit_or_rollback(own_server, binlog):
    server = own_server
    _setup(server)
    server.sql("INSERT INTO test.events VALUES (1), (2), (3)")
    for xid in ("sub1", "sub2"):  # each ends one row of a, in a prepared XA transaction
        c = server.connect()
        query(c, f"XA START '{xid}'")
        assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
        row = value(c, "SELECT id FROM test.events")
        query(c, f"INSERT INTO test.results VALUES ({row})")
        assert value(c, "SELECT queue_end()") == 1
        query(c, f"XA END '{xid}'")
        query(c, f"XA PREPARE '{xid}'")
        c.close()
    server.restart(kill=True)
    server.sql("SELECT queue_compact('test.events')")
    server.restart()
    assert sorted(bytes(r[3]) for r in server.sql("XA RECOVER")) == [b"sub1", b"sub2"]
    c = server.connect()
    # Rows 1 and 2 are held by the prepared parts: a's next row is row 3.
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
    assert value(c, "SELECT id FROM test.events") == 3
    query(c, "SELECT queue_abort()")
    query(c, "XA COMMIT 'sub1'")
    query(c, "XA ROLLBACK 'sub2'")
    assert server.sql("SELECT id FROM test.results") == [(1,)]
    assert _pending(server) == {"a": 2, "b": 3}
    server.restart(kill=True)
    assert _pending(server) == {"a": 2, "b": 3}
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1  # row 2: given back by the rollback
    assert value(c, "SELECT id FROM test.events") == 2
    query(c, "SELECT queue_abort()")


def test_an_autocommit_end_still_commits_at_once(server):
    _setup(server)
    server.sql("INSERT INTO test.events VALUES (1)")
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert _pending(server) == {"a": 0, "b": 1}


def test_a_ledger_of_concurrent_transactional_and_autocommit_consumers(server):
    """Three connections consume a in transactions (every third rolled back), one consumes b in
    autocommit, concurrently: each row ends up in a's results exactly once (a primary key
    would refuse a second), b gets each once, and every row leaves the table."""
    import random
    import threading
    server.sql("CREATE TABLE test.events (id INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.results (id INT PRIMARY KEY) ENGINE=InnoDB")
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("SELECT queue_subscribe('test.events', 'b')")
    n = 90
    server.sql("INSERT INTO test.events VALUES " + ",".join(f"({i})" for i in range(1, n + 1)))
    b_got, errors = [], []

    def consume_a(seed):
        rnd = random.Random(seed)
        c = server.connect()
        try:
            while True:
                query(c, "BEGIN")
                if value(c, "SELECT queue_wait('test.events@a', 0)") != 1:
                    query(c, "ROLLBACK")
                    return
                row = value(c, "SELECT id FROM test.events")
                query(c, f"INSERT INTO test.results VALUES ({row})")
                assert value(c, "SELECT queue_end()") == 1
                query(c, "ROLLBACK" if rnd.random() < 0.33 else "COMMIT")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def consume_b():
        c = server.connect()
        try:
            while value(c, "SELECT queue_wait('test.events@b', 0)") == 1:
                b_got.append(value(c, "SELECT id FROM test.events"))
            value(c, "SELECT queue_end()")
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=consume_a, args=(i,)) for i in range(3)] + [threading.Thread(target=consume_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert [r[0] for r in server.sql("SELECT id FROM test.results ORDER BY id")] == list(range(1, n + 1))
    assert sorted(b_got) == list(range(1, n + 1))
    assert _pending(server) == {"a": 0, "b": 0}
    assert server.value("SELECT COUNT(*) FROM test.events") == 0


def test_a_batch_ended_in_a_transaction_comes_back_whole_on_rollback_and_goes_on_commit(server):
    _setup(server)
    server.sql("INSERT INTO test.events VALUES (1), (2), (3)")
    c = server.connect()
    for finish in ("ROLLBACK", "COMMIT"):
        query(c, "BEGIN")
        assert [r[0] for r in query(c, "SELECT id FROM test.events WHERE queue_wait_batch('test.events@a', 10, 0)")] == [1, 2, 3]
        query(c, "INSERT INTO test.results SELECT id FROM test.events")
        assert value(c, "SELECT queue_end()") == 1
        assert _pending(server)["a"] == 3
        query(c, finish)
    assert server.value("SELECT COUNT(*) FROM test.results") == 3
    assert _pending(server) == {"a": 0, "b": 3}
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 0
    query(c, "SELECT queue_abort()")
