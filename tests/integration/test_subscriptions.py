"""Subscriptions (issue 44): one table, one copy of each row, named subscriptions each a queue of
its own over the rows ('events@billing'), created and dropped by SQL, kept in the data file
across restarts, kill -9 and compaction."""
import json
import threading
import time

import pymysql
import pytest

from binlog_modes import both_binlog_modes
from sqlcheck import query, value


def _events(server, extra=""):
    server.sql(f"CREATE TABLE test.events (id INT, kind VARCHAR(20)) ENGINE=QUEUE {extra}")


def _take_all(conn, source, limit=10000):
    """Rows (id) taken and ended one by one from `source` until none is left."""
    got = []
    while len(got) < limit:
        rows = query(conn, f"SELECT id FROM test.events WHERE queue_wait('{source}', 0)")
        if not rows:
            break
        got.append(rows[0][0])
    value(conn, "SELECT queue_end()") if got else None
    return got


def _drain(conn, source):
    """Rows (id) taken in batches (queue_wait_batch) and ended, until none is left."""
    got = []
    while True:
        rows = query(conn, f"SELECT id FROM test.events WHERE queue_wait_batch('{source}', 1000, 0)")
        if not rows:
            value(conn, "SELECT queue_end()")
            return got
        got.extend(r[0] for r in rows)
        assert value(conn, "SELECT queue_end()") == 1


def _subs(server):
    return {r[0]: r[1:] for r in server.sql(
        "SELECT SUBSCRIPTION_NAME, PENDING_ROWS, OWNED_ROWS, DEAD_ROWS FROM information_schema.QUEUE_SUBSCRIPTIONS "
        "WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'events' ORDER BY SUBSCRIPTION_NAME")}


@both_binlog_modes
def test_each_subscription_gets_every_row_once_and_the_row_goes_when_all_ended(fresh_server, binlog):
    server = fresh_server
    _events(server)
    assert server.value("SELECT queue_subscribe('test.events', 'billing')") == 1
    assert server.value("SELECT queue_subscribe('test.events', 'email')") == 1
    server.sql("INSERT INTO test.events VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    c = server.connect()
    assert _take_all(c, "test.events@billing") == [1, 2, 3]
    assert server.value("SELECT COUNT(*) FROM test.events") == 3  # email has not ended them
    assert _take_all(c, "test.events@email") == [1, 2, 3]
    assert server.value("SELECT COUNT(*) FROM test.events") == 0
    assert _take_all(c, "test.events@billing") == []
    # a plain wait on a subscribed table takes no subscribed row
    server.sql("INSERT INTO test.events VALUES (4, 'd')")
    assert value(c, "SELECT queue_wait('test.events', 0)") == 0
    value(c, "SELECT queue_abort()")


def test_a_condition_binds_rows_and_rows_matching_none_are_removed(server):
    _events(server)
    server.sql("SELECT queue_subscribe('test.events', 'orders', 'kind = ''order''')")
    server.sql("INSERT INTO test.events VALUES (1, 'order'), (2, 'refund'), (3, 'order')")
    c = server.connect()
    assert _take_all(c, "test.events@orders") == [1, 3]
    # row 2 matched no subscription: gone with the others
    wait_until(lambda: server.value("SELECT COUNT(*) FROM test.events") == 0)


def test_oldest_covers_rows_in_the_table_and_newest_does_not(server):
    _events(server)
    server.sql("INSERT INTO test.events VALUES (1, 'a'), (2, 'b')")
    server.sql("SELECT queue_subscribe('test.events', 'old', 'oldest')")
    server.sql("SELECT queue_subscribe('test.events', 'new', NULL, 'newest')")
    server.sql("INSERT INTO test.events VALUES (3, 'c')")
    c = server.connect()
    assert _take_all(c, "test.events@old") == [1, 2, 3]
    assert _take_all(c, "test.events@new") == [3]


def test_abort_retries_per_subscription_and_delivery_counts_are_its_own(server):
    _events(server)
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("SELECT queue_subscribe('test.events', 'b')")
    server.sql("INSERT INTO test.events VALUES (1, 'x')")
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
    assert value(c, "SELECT queue_abort()") == 1
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
    assert value(c, "SELECT queue_delivery_count()") == 2
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('test.events@b', 0)") == 1
    assert value(c, "SELECT queue_delivery_count()") == 1
    assert query(c, "SELECT id FROM test.events") == [(1,)]  # the owner reads its row
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.events") == 0


def test_subscriptions_and_their_ends_survive_restart_kill9_and_compaction(fresh_server):
    server = fresh_server
    _events(server)
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("SELECT queue_subscribe('test.events', 'b', 'kind <> ''skip''')")
    server.sql("INSERT INTO test.events VALUES (1, 'x'), (2, 'skip'), (3, 'y'), (4, 'z')")
    c = server.connect()
    assert query(c, "SELECT id FROM test.events WHERE queue_wait('test.events@a', 0)") == [(1,)]
    assert query(c, "SELECT id FROM test.events WHERE queue_wait('test.events@a', 0)") == [(2,)]
    assert value(c, "SELECT queue_end()") == 1
    server.restart(kill=True)
    c = server.connect()
    assert _take_all(c, "test.events@a") == [3, 4]
    server.sql("SELECT queue_compact('test.events')")
    server.restart()
    c = server.connect()
    assert _take_all(c, "test.events@a") == []
    assert _take_all(c, "test.events@b") == [1, 3, 4]
    wait_until(lambda: server.value("SELECT COUNT(*) FROM test.events") == 0)


def test_dropping_a_lagging_subscription_frees_its_rows(server):
    _events(server)
    server.sql("SELECT queue_subscribe('test.events', 'fast')")
    server.sql("SELECT queue_subscribe('test.events', 'slow')")
    server.sql("INSERT INTO test.events VALUES (1, 'x'), (2, 'y')")
    c = server.connect()
    assert _take_all(c, "test.events@fast") == [1, 2]
    subs = _subs(server)
    assert subs["slow"][0] == 2 and subs["fast"][0] == 0
    stats = server.queue_stats("test.events")
    assert [s["name"] for s in stats["subscriptions"]] == ["fast", "slow"]
    assert server.value("SELECT queue_unsubscribe('test.events', 'slow')") == 1
    assert server.value("SELECT COUNT(*) FROM test.events") == 0
    assert list(_subs(server)) == ["fast"]


def test_bad_input_names_what_is_wrong(server):
    _events(server)
    c = server.connect()
    with pytest.raises(pymysql.err.OperationalError, match="has no subscription 'nope'"):
        value(c, "SELECT queue_wait('test.events@nope', 0)")
    with pytest.raises(pymysql.err.OperationalError, match="exists already"):
        server.sql("SELECT queue_subscribe('test.events', 'x')")
        server.sql("SELECT queue_subscribe('test.events', 'x')")
    with pytest.raises(pymysql.err.OperationalError, match="only letters"):
        server.sql("SELECT queue_subscribe('test.events', 'a b')")
    with pytest.raises(pymysql.err.OperationalError, match="no_such_column"):
        server.sql("SELECT queue_subscribe('test.events', 'y', 'no_such_column = 1')")
    with pytest.raises(pymysql.err.OperationalError, match="has no subscription 'zz'"):
        server.sql("SELECT queue_unsubscribe('test.events', 'zz')")


def wait_until(cond, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


SUBSCRIPTIONS = {"billing": None, "email": None, "big": "id % 3 = 0"}


@both_binlog_modes
def test_ledger_each_row_once_per_matching_subscription_across_kill9(fresh_server, binlog):
    """Producers and two consumers per subscription run while the server is killed (-9): after a
    restart and a drain, every row a producer was told was inserted was ended exactly once by
    every subscription it matches (or its end's answer was lost with the server, and it was not
    delivered again), and no subscription got a row outside its condition."""
    server = fresh_server
    _events(server)
    for name, cond in SUBSCRIPTIONS.items():
        if cond:
            server.sql("SELECT queue_subscribe('test.events', %s, %s)", (name, cond))
        else:
            server.sql("SELECT queue_subscribe('test.events', %s)", (name,))
    lock = threading.Lock()
    inserted = set()
    acked = {name: [] for name in SUBSCRIPTIONS}
    maybe = {name: set() for name in SUBSCRIPTIONS}
    delivered = {name: set() for name in SUBSCRIPTIONS}
    next_id = iter(range(1, 10 ** 9))

    def producer(stop):
        try:
            c = server.connect()
            while not stop.is_set():
                with lock:
                    ids = [next(next_id) for _ in range(3)]
                c.cursor().execute("INSERT INTO test.events VALUES " + ", ".join(f"({i}, 'k')" for i in ids))
                with lock:
                    inserted.update(ids)
        except pymysql.err.MySQLError:
            pass

    def consumer(name):
        def run(stop):
            row = None
            try:
                c = server.connect()
                while not stop.is_set():
                    rows = query(c, f"SELECT id FROM test.events WHERE queue_wait('test.events@{name}', 1)")
                    if not rows:
                        continue
                    row = rows[0][0]
                    with lock:
                        delivered[name].add(row)
                    value(c, "SELECT queue_end()")
                    with lock:
                        acked[name].append(row)
                    row = None
            except pymysql.err.MySQLError:
                if row is not None:
                    with lock:
                        maybe[name].add(row)
        return run

    workers = [producer, producer] + [consumer(n) for n in SUBSCRIPTIONS for _ in range(2)]
    server.kill9_under_load(workers, 2.5)
    server.start()
    c = server.connect()
    for name in SUBSCRIPTIONS:
        got = _drain(c, f"test.events@{name}")
        acked[name].extend(got)
        delivered[name].update(got)
    assert len(inserted) > 30, "the load inserted too little to test anything"
    for name, cond in SUBSCRIPTIONS.items():
        matches = (lambda i: i % 3 == 0) if cond else (lambda i: True)
        counts = {}
        for i in acked[name]:
            counts[i] = counts.get(i, 0) + 1
        assert [i for i, n in counts.items() if n > 1] == [], f"{name}: ended twice"
        assert [i for i in delivered[name] if not matches(i)] == [], f"{name}: rows outside its condition"
        missing = [i for i in inserted if matches(i) and i not in counts and i not in maybe[name]]
        assert missing == [], f"{name}: inserted rows never ended"
    wait_until(lambda: server.value("SELECT COUNT(*) FROM test.events") == 0)


def test_dead_letters_and_leases_are_per_subscription(server):
    _events(server, "MAX_DELIVERIES=2")
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("SELECT queue_subscribe('test.events', 'b')")
    server.sql("INSERT INTO test.events VALUES (1, 'x')")
    c = server.connect()
    for _ in range(2):
        assert value(c, "SELECT queue_wait('test.events@a', 0)") == 1
        assert value(c, "SELECT queue_abort()") == 1
    assert value(c, "SELECT queue_wait('test.events@a', 0)") == 0  # dead for a
    value(c, "SELECT queue_abort()")
    assert _subs(server)["a"][2] == 1
    # b's delivery is its own: the row is free there
    assert query(c, "SELECT id FROM test.events WHERE queue_wait('test.events@b', 0)") == [(1,)]
    assert value(c, "SELECT queue_end()") == 1
    assert query(c, "SELECT id FROM test.events WHERE queue_take_dead('test.events@a')") == [(1,)]
    assert value(c, "SELECT queue_delivery_count()") == 3
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.events") == 0

    # a lease that runs out gives the row back to its subscription only
    server.sql("INSERT INTO test.events VALUES (2, 'y')")
    hung, other = server.connect(), server.connect()
    assert value(hung, "SELECT queue_wait('test.events@a', 0)") == 1
    assert value(hung, "SELECT queue_renew_lease(1)") == 1
    wait_until(lambda: value(other, "SELECT queue_wait('test.events@a', 0)") == 1)
    with pytest.raises(pymysql.err.OperationalError):
        value(hung, "SELECT queue_end()")
    assert value(other, "SELECT queue_delivery_count()") == 2
    assert value(other, "SELECT queue_end()") == 1


def test_a_wait_lists_subscriptions_and_conditions(server):
    _events(server)
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("SELECT queue_subscribe('test.events', 'b')")
    server.sql("INSERT INTO test.events VALUES (1, 'x'), (2, 'y')")
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.events@a:kind=''y''', 'test.events@b', 0)") == 1
    assert query(c, "SELECT id FROM test.events") == [(2,)]
    assert value(c, "SELECT queue_wait('test.events@a:kind=''y''', 'test.events@b', 0)") == 2
    assert query(c, "SELECT id FROM test.events") == [(1,)]
    assert value(c, "SELECT queue_end()") == 1
    stats = json.loads(server.value("SELECT queue_stats('test.events@a')"))
    assert stats["table"] == "test.events@a" and stats["rows"] == 1


def test_a_copying_alter_is_refused_while_the_table_has_subscriptions(server):
    _events(server)
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("INSERT INTO test.events VALUES (1, 'x')")
    with pytest.raises(pymysql.err.MySQLError, match="subscriptions"):
        server.sql("ALTER TABLE test.events ADD COLUMN extra INT")
    c = server.connect()
    assert _take_all(c, "test.events@a") == [1]
    assert server.value("SELECT queue_unsubscribe('test.events', 'a')") == 1
    server.sql("ALTER TABLE test.events ADD COLUMN extra INT")


def test_a_subscription_batch_reads_and_counts_its_rows(server):
    _events(server)
    server.sql("SELECT queue_subscribe('test.events', 'a')")
    server.sql("INSERT INTO test.events VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    c = server.connect()
    assert value(c, "SELECT queue_wait_batch('test.events@a', 2, 0)") == 2
    assert query(c, "SELECT id FROM test.events") == [(1,), (2,)]
    assert value(c, "SELECT COUNT(*) FROM test.events") == 2
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT COUNT(*) FROM test.events") == 1
