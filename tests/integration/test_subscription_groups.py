"""Message groups and limits per subscription (issue 44): MESSAGE_GROUP_COLUMN order,
GROUP_CONCURRENCY, MAX_IN_FLIGHT act within each subscription ('tbl@sub') as in a queue of its
own, and VISIBLE_AT_COLUMN holds a row back from every subscription until its time."""
import threading
import time

import pymysql
import pytest

from binlog_modes import both_binlog_modes
from sqlcheck import query, value


def _orders(server, extra=""):
    server.sql(f"CREATE TABLE test.orders (id INT, grp VARCHAR(20)) ENGINE=QUEUE MESSAGE_GROUP_COLUMN='grp' {extra}")
    for sub in ("billing", "email"):
        assert server.value(f"SELECT queue_subscribe('test.orders', '{sub}')") == 1


def _take(conn, source):
    """The id of the row `conn` takes from `source` now (None: none)."""
    rows = query(conn, f"SELECT id FROM test.orders WHERE queue_wait('{source}', 0)")
    return rows[0][0] if rows else None


def _wait_until(cond, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


@both_binlog_modes
def test_each_subscription_gets_a_groups_rows_in_order_one_at_a_time(server, binlog):
    server.sql("DROP TABLE IF EXISTS test.orders")
    _orders(server)
    server.sql("INSERT INTO test.orders VALUES (1, 'A'), (2, 'A'), (3, 'B'), (4, 'A'), (5, NULL)")
    c1, c2, c3, e1 = (server.connect() for _ in range(4))
    assert _take(c1, "test.orders@billing") == 1
    assert _take(c2, "test.orders@billing") == 3  # 2 waits for 1
    assert _take(c3, "test.orders@billing") == 5  # no group: goes on
    assert _take(e1, "test.orders@email") == 1  # billing holding A does not hold it for email
    assert value(e1, "SELECT queue_end()") == 1
    assert _take(e1, "test.orders@email") == 2
    assert value(c3, "SELECT queue_end()") == 1
    assert _take(c3, "test.orders@billing") is None  # billing's 2 still waits for its 1
    assert value(c1, "SELECT queue_abort()") == 1  # back: still ahead of 2
    assert _take(c3, "test.orders@billing") == 1
    assert value(c3, "SELECT queue_end()") == 1
    assert _take(c3, "test.orders@billing") == 2
    # a consumer waiting for the group gets its next row when the row ahead ends
    got = []
    t = threading.Thread(target=lambda: got.append(query(
        c1, "SELECT id FROM test.orders WHERE queue_wait('test.orders@billing', 20)")))
    t.start()
    _wait_until(lambda: server.value(
        "SELECT WAITERS FROM information_schema.QUEUE_SUBSCRIPTIONS WHERE TABLE_NAME = 'orders' "
        "AND SUBSCRIPTION_NAME = 'billing'") == 1)
    assert value(c3, "SELECT queue_end()") == 1
    t.join(30)
    assert got == [[(4,)]]
    for c in (c1, c2, e1):
        value(c, "SELECT queue_end()")
    server.sql("DROP TABLE test.orders")


@both_binlog_modes
def test_concurrent_consumers_of_two_subscriptions_keep_every_group_in_order(fresh_server, binlog):
    server = fresh_server
    _orders(server, "GROUP_CONCURRENCY=1")
    groups, per_group = 6, 15
    rows = [(i, f"g{(i - 1) // 3 % groups}") for i in range(1, groups * per_group + 1)]  # runs of 3
    server.sql("INSERT INTO test.orders VALUES " + ", ".join(f"({i}, '{g}')" for i, g in rows))
    group_of = dict(rows)
    lock = threading.Lock()
    out = {"billing": set(), "email": set()}   # groups with a row out now, per subscription
    seen = {"billing": [], "email": []}
    errors = []

    def worker(sub):
        conn = server.connect()
        try:
            while True:
                r = query(conn, f"SELECT id FROM test.orders WHERE queue_wait('test.orders@{sub}', 1)")
                if not r:
                    value(conn, "SELECT queue_end()")
                    with lock:
                        if len(seen[sub]) == len(rows):
                            return
                    continue
                rid = r[0][0]
                g = group_of[rid]
                with lock:
                    if g in out[sub]:
                        errors.append(f"{sub}: two rows of {g} out at once ({rid})")
                    out[sub].add(g)
                    seen[sub].append(rid)
                time.sleep(0.002)  # hold it a moment: another consumer may try the group
                with lock:
                    out[sub].discard(g)
                assert value(conn, "SELECT queue_end()") == 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(sub,)) for sub in ("billing", "email") for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    for sub in ("billing", "email"):
        assert sorted(seen[sub]) == [i for i, _ in rows]  # each row once per subscription
        for g in range(groups):
            ids = [i for i in seen[sub] if group_of[i] == f"g{g}"]
            assert ids == sorted(ids), (sub, g, ids)  # in order within each group
    _wait_until(lambda: server.value("SELECT COUNT(*) FROM test.orders") == 0)


def test_max_in_flight_is_each_subscriptions_own_budget(server):
    server.sql("DROP TABLE IF EXISTS test.orders")
    server.sql("CREATE TABLE test.orders (id INT, grp VARCHAR(20)) ENGINE=QUEUE MAX_IN_FLIGHT=1")
    for sub in ("billing", "email"):
        server.sql(f"SELECT queue_subscribe('test.orders', '{sub}')")
    server.sql("INSERT INTO test.orders VALUES (1, NULL), (2, NULL)")
    c1, c2, e1 = (server.connect() for _ in range(3))
    assert _take(c1, "test.orders@billing") == 1
    assert _take(c2, "test.orders@billing") is None  # billing's one row is out
    assert _take(e1, "test.orders@email") == 1  # email's budget is its own
    assert value(c1, "SELECT queue_end()") == 1
    assert _take(c2, "test.orders@billing") == 2
    for c in (c2, e1):
        value(c, "SELECT queue_end()")
    server.sql("DROP TABLE test.orders")


@both_binlog_modes
def test_a_row_not_visible_yet_goes_to_no_subscription_before_its_time(server, binlog):
    server.sql("DROP TABLE IF EXISTS test.orders")
    server.sql("CREATE TABLE test.orders (id INT, run_at TIMESTAMP(3) NULL) ENGINE=QUEUE VISIBLE_AT_COLUMN='run_at'")
    for sub in ("billing", "email"):
        server.sql(f"SELECT queue_subscribe('test.orders', '{sub}')")
    server.sql("INSERT INTO test.orders VALUES (1, NOW(3) + INTERVAL 2 SECOND), (2, NULL)")
    inserted = time.monotonic()
    c, e = server.connect(), server.connect()
    assert _take(c, "test.orders@billing") == 2
    assert value(c, "SELECT queue_end()") == 1
    assert _take(c, "test.orders@billing") is None
    assert _take(e, "test.orders@email") == 2
    assert value(e, "SELECT queue_end()") == 1
    # a waiting consumer gets it once due
    assert query(c, "SELECT id FROM test.orders WHERE queue_wait('test.orders@billing', 20)") == [(1,)]
    assert time.monotonic() - inserted >= 1.5
    assert value(c, "SELECT queue_end()") == 1
    assert query(e, "SELECT id FROM test.orders WHERE queue_wait('test.orders@email', 20)") == [(1,)]
    assert value(e, "SELECT queue_end()") == 1
    server.sql("DROP TABLE test.orders")


def test_after_kill9_ended_rows_stay_ended_and_owned_ones_lead_their_group(fresh_server):
    server = fresh_server
    _orders(server)
    server.sql("INSERT INTO test.orders VALUES (1, 'A'), (2, 'A'), (3, 'A')")
    c = server.connect()
    assert _take(c, "test.orders@billing") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert _take(c, "test.orders@billing") == 2  # owned at the crash
    server.restart(kill=True)
    c1, c2 = server.connect(), server.connect()
    assert _take(c1, "test.orders@billing") == 2  # back, ahead of 3; 1 stays ended
    assert _take(c2, "test.orders@billing") is None
    assert value(c1, "SELECT queue_end()") == 1
    assert _take(c2, "test.orders@billing") == 3
    assert _take(c1, "test.orders@email") == 1


def test_owned_rows_list_and_release_a_subscriptions_rows(server):
    server.sql("DROP TABLE IF EXISTS test.orders")
    _orders(server)
    server.sql("INSERT INTO test.orders VALUES (1, 'A'), (2, 'A')")
    hung, other, email, op = (server.connect() for _ in range(4))
    assert _take(hung, "test.orders@billing") == 1
    assert _take(email, "test.orders@email") == 1
    hung_id = value(hung, "SELECT CONNECTION_ID()")
    owned = server.sql("SELECT ROW_ID, CONNECTION_ID, DELIVERY_COUNT, SUBSCRIPTION_NAME "
                       "FROM information_schema.QUEUE_OWNED_ROWS WHERE TABLE_NAME = 'orders' "
                       "ORDER BY SUBSCRIPTION_NAME")
    assert owned == [(1, hung_id, 1, "billing"), (1, value(email, "SELECT CONNECTION_ID()"), 1, "email")]
    assert value(op, "SELECT queue_release_owned('test.orders@billing', 1)") == 1
    assert value(op, "SELECT queue_release_owned('test.orders@billing', 1)") == 0  # not owned now
    assert _take(other, "test.orders@billing") == 1  # back ahead of its group
    assert value(other, "SELECT queue_delivery_count()") == 2
    with pytest.raises(pymysql.err.OperationalError) as e:
        value(hung, "SELECT queue_end()")
    assert e.value.args[0] == 1205
    assert value(other, "SELECT queue_end()") == 1
    assert _take(other, "test.orders@billing") == 2
    assert value(other, "SELECT queue_end()") == 1
    assert value(email, "SELECT queue_end()") == 1  # email's delivery was untouched
    assert server.sql("SELECT * FROM information_schema.QUEUE_OWNED_ROWS WHERE TABLE_NAME = 'orders'") == []
    server.sql("DROP TABLE test.orders")


@both_binlog_modes
def test_redrive_and_purge_a_subscriptions_dead_rows(server, binlog):
    server.sql("DROP TABLE IF EXISTS test.orders")
    _orders(server, "MAX_DELIVERIES=1")
    server.sql("INSERT INTO test.orders VALUES (1, 'A'), (2, 'B')")
    c, e = server.connect(), server.connect()
    for rid in (1, 2):  # both dead for billing
        assert _take(c, "test.orders@billing") == rid
        assert value(c, "SELECT queue_abort()") == 1

    def dead():
        return server.value("SELECT DEAD_ROWS FROM information_schema.QUEUE_SUBSCRIPTIONS "
                            "WHERE TABLE_NAME = 'orders' AND SUBSCRIPTION_NAME = 'billing'")
    assert dead() == 2
    assert value(c, "SELECT queue_redrive_dead('test.orders@billing', 1)") == 1  # row 1 is billing's again
    assert dead() == 1
    assert _take(c, "test.orders@billing") == 1
    assert value(c, "SELECT queue_delivery_count()") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_purge_dead('test.orders@billing')") == 1  # row 2 ended for billing
    assert dead() == 0
    assert server.value("SELECT COUNT(*) FROM test.orders") == 2  # email still needs both
    for rid in (1, 2):
        assert _take(e, "test.orders@email") == rid
        assert value(e, "SELECT queue_end()") == 1
    _wait_until(lambda: server.value("SELECT COUNT(*) FROM test.orders") == 0)
    server.sql("DROP TABLE test.orders")



@both_binlog_modes
def test_an_end_committed_in_a_transaction_frees_its_groups_next_row(server, binlog):
    """A subscription's end inside a transaction holds the group's place until the COMMIT, and
    the COMMIT frees it (a ROLLBACK gives the row back, still ahead of its group)."""
    server.sql("DROP TABLE IF EXISTS test.orders")
    _orders(server)
    server.sql("INSERT INTO test.orders VALUES (1, 'A'), (2, 'A'), (3, 'A')")
    c, other = server.connect(), server.connect()
    assert _take(c, "test.orders@billing") == 1
    c.begin()
    assert value(c, "SELECT queue_end()") == 1
    assert _take(other, "test.orders@billing") is None  # 1 is not ended before the COMMIT
    c.rollback()
    assert _take(other, "test.orders@billing") == 1  # back, still ahead of 2
    other.begin()
    assert value(other, "SELECT queue_end()") == 1
    other.commit()
    assert _take(c, "test.orders@billing") == 2  # the COMMIT freed A's place
    c.begin()
    assert value(c, "SELECT queue_end()") == 1
    c.commit()
    assert _take(other, "test.orders@billing") == 3
    assert value(other, "SELECT queue_end()") == 1
    server.sql("DROP TABLE test.orders")
