"""Subscriptions on a replica (issue 44): queue_subscribe / queue_unsubscribe and every
subscription's ends reach a replica through the binary log (queue_apply_subscribe,
queue_apply_unsubscribe, queue_apply_sub_end: engine/subscription_binlog.h), so a replica holds
the same subscriptions and the same rows per subscription, and a failover keeps every
acknowledged end: after promoting the replica each row is delivered to each subscription it
matches exactly once overall. Real MariaDB replication (replication_pair.py)."""
import threading

import pymysql
import pytest

from replication_pair import Chain, Pair
from semisync_cluster import Cluster
from sqlcheck import expect_error, query, value, wait_until


@pytest.fixture
def pair(server_factory):
    p = Pair(server_factory)
    yield p
    p.destroy()


def subscriptions(server, table="events"):
    """(name, condition, start row id) of each subscription of test.`table`."""
    return server.sql(
        "SELECT SUBSCRIPTION_NAME, CONDITION_TEXT, START_ROWID FROM information_schema.QUEUE_SUBSCRIPTIONS "
        f"WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = '{table}' ORDER BY SUBSCRIPTION_NAME")


def pending(server, table="events"):
    return dict(server.sql(
        "SELECT SUBSCRIPTION_NAME, PENDING_ROWS FROM information_schema.QUEUE_SUBSCRIPTIONS "
        f"WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = '{table}'"))


def rows_with_ids(server, table="events"):
    return server.sql(f"SELECT queue_scan_rowid(), id FROM test.{table}")


def take_and_end(conn, source, n):
    """Up to n rows (id) taken from `source` one by one; each acknowledged by the next wait's
    end or the final queue_end()."""
    got = []
    while len(got) < n:
        r = query(conn, f"SELECT id FROM events WHERE queue_wait('{source}', 0)")
        if not r:
            break
        got.append(r[0][0])
    if got:
        assert value(conn, "SELECT queue_end()") == 1
    return got


def batch_and_end(conn, source, n):
    got = [r[0] for r in query(conn, f"SELECT id FROM events WHERE queue_wait_batch('{source}', {n}, 0)")]
    assert value(conn, "SELECT queue_end()") == 1
    return got


def drain(conn, source):
    """Every row left for `source`, in batches, each ended."""
    got = []
    while True:
        rows = query(conn, f"SELECT id FROM events WHERE queue_wait_batch('{source}', 1000, 0)")
        assert value(conn, "SELECT queue_end()") in (0, 1)
        if not rows:
            return got
        got += [r[0] for r in rows]


def promote(pair):
    """The failover runbook's step 2 on the replica (docs/replication.md)."""
    pair.replica.sql("STOP SLAVE")
    pair.replica.sql("RESET SLAVE ALL")
    pair.replica.sql("SET GLOBAL read_only = OFF")


def test_subscriptions_and_their_drop_reach_the_replica(pair):
    """Same names, conditions and start row ids on the replica ('newest', 'oldest', with a
    condition), a drop too, and the rows the dropped one alone held leave the replica with the
    primary's ids (the primary's removals, not the replica's own decision)."""
    p = pair.primary.connect()
    query(p, "CREATE TABLE events (id INT, kind VARCHAR(20)) ENGINE=QUEUE")
    query(p, "INSERT INTO events VALUES (1, 'order'), (2, 'signup')")
    assert value(p, "SELECT queue_subscribe('events', 'billing')") == 1
    query(p, "INSERT INTO events VALUES (3, 'order'), (4, 'signup')")
    assert value(p, "SELECT queue_subscribe('events', 'email', 'kind = ''signup''')") == 1
    assert value(p, "SELECT queue_subscribe('events', 'audit', NULL, 'oldest')") == 1
    query(p, "INSERT INTO events VALUES (5, 'order')")
    pair.sync()
    subs = subscriptions(pair.primary)
    assert [s[:2] for s in subs] == [("audit", ""), ("billing", ""), ("email", "kind = 'signup'")]
    assert [s[2] for s in subs] == [1, 3, 5]
    assert subscriptions(pair.replica) == subs
    assert pending(pair.replica) == pending(pair.primary) == {"audit": 5, "billing": 3, "email": 1}

    # billing and email end their rows; audit holds them all; dropping audit frees them.
    assert take_and_end(p, "events@billing", 10) == [3, 4, 5]
    assert take_and_end(p, "events@email", 10) == []  # row 5 is not a signup
    assert take_and_end(p, "events@audit", 2) == [1, 2]
    pair.sync()
    assert rows_with_ids(pair.replica) == rows_with_ids(pair.primary) == [(3, 3), (4, 4), (5, 5)]
    assert value(p, "SELECT queue_unsubscribe('events', 'audit')") == 1
    wait_until(lambda: pair.primary.value("SELECT COUNT(*) FROM test.events") == 0, what="rows freed by the drop")
    pair.sync()
    assert [s[0] for s in subscriptions(pair.replica)] == ["billing", "email"]
    assert subscriptions(pair.replica) == subscriptions(pair.primary)
    assert rows_with_ids(pair.replica) == []
    assert pair.status()["Slave_SQL_Running"] == "Yes"


@pytest.mark.parametrize("binlog_format", ["ROW", "MIXED"])
def test_a_failover_keeps_every_subscriptions_acknowledged_ends(pair, binlog_format):
    """The ledger: two subscriptions (one with a condition), consumed partly on the primary
    (queue_wait, batches, an end in a rolled-back transaction with an InnoDB row, which gives the
    row back, one in a committed one, a row left owned at the failover). The replica holds the
    primary's rows under its ids and the same subscriptions; promoted, it delivers to each
    subscription exactly the rows it did not end on the primary: each row once per matching
    subscription overall, none to a subscription it does not match (with MIXED too: an
    autocommit end's statement is written as a change of its own, never into a transaction's
    cache that a ROLLBACK drops)."""
    p = pair.primary.connect()
    c = pair.primary.connect()
    for conn in (p, c):
        query(conn, "SET SESSION binlog_format = %s", (binlog_format,))
    query(p, "CREATE TABLE events (id INT, kind VARCHAR(20)) ENGINE=QUEUE")
    query(p, "CREATE TABLE audit_log (id INT) ENGINE=InnoDB")
    assert value(p, "SELECT queue_subscribe('events', 'billing')") == 1
    assert value(p, "SELECT queue_subscribe('events', 'email', 'kind = ''signup''')") == 1
    kinds = ("order", "signup", "refund")
    n = 120
    for start in range(1, n + 1, 20):
        query(p, "INSERT INTO events VALUES " + ",".join(f"({i}, '{kinds[i % 3]}')" for i in range(start, start + 20)))
    matches = {"billing": set(range(1, n + 1)), "email": {i for i in range(1, n + 1) if kinds[i % 3] == "signup"}}

    ended = {"billing": [], "email": []}  # acknowledged on the primary
    ended["billing"] += take_and_end(c, "events@billing", 15)
    ended["billing"] += batch_and_end(c, "events@billing", 25)
    ended["email"] += take_and_end(c, "events@email", 10)
    ended["email"] += batch_and_end(c, "events@email", 12)
    # An end inside a transaction: undone by its ROLLBACK, made by its COMMIT (with the InnoDB row).
    for finish in ("ROLLBACK", "COMMIT"):
        query(c, "BEGIN")
        query(c, "INSERT INTO audit_log VALUES (1)")
        r = query(c, "SELECT id FROM events WHERE queue_wait('events@billing', 0)")
        assert value(c, "SELECT queue_end()") == 1
        query(c, finish)
    ended["billing"].append(r[0][0])
    # A row owned (not ended) at the failover: delivered again on the new primary.
    owner = pair.primary.connect()
    held = query(owner, "SELECT id FROM events WHERE queue_wait('events@email', 0)")[0][0]
    assert held not in ended["email"]
    pair.sync()

    assert subscriptions(pair.replica) == subscriptions(pair.primary)
    assert rows_with_ids(pair.replica) == rows_with_ids(pair.primary)
    assert pending(pair.replica)["billing"] == pending(pair.primary)["billing"] == n - len(ended["billing"])
    assert pair.status()["Slave_SQL_Running"] == "Yes"

    promote(pair)
    r = pair.replica.connect()
    for sub in ("billing", "email"):
        assert len(ended[sub]) == len(set(ended[sub]))
        after = take_and_end(r, f"events@{sub}", 10) + drain(r, f"events@{sub}")
        assert not set(after) & set(ended[sub]), f"{sub}: rows acknowledged on the primary delivered again"
        assert sorted(after + ended[sub]) == sorted(matches[sub]), f"{sub}: not every row exactly once"
        assert take_and_end(r, f"events@{sub}", 1) == []
    assert held in after  # email's row owned on the dead primary came again
    wait_until(lambda: pair.replica.value("SELECT COUNT(*) FROM test.events") == 0, what="every row decided")


def _binlog_groups(server):
    """The primary's binary log as event groups (each from its BEGIN on), of (type, info)."""
    groups = []
    for log in server.sql("SHOW BINARY LOGS"):
        for e in server.sql(f"SHOW BINLOG EVENTS IN '{log[0]}'"):
            kind, info = e[2], e[5]
            if kind in ("Gtid", "Query") and (info.startswith("BEGIN") or "BEGIN GTID" in info):
                groups.append([])
            if groups:
                groups[-1].append((kind, info))
    return groups


def test_a_transactional_end_replicates_with_its_innodb_row_and_a_rollback_not_at_all(pair):
    """A subscription's end inside a transaction is logged in the transaction (its
    queue_apply_sub_end with the InnoDB rows, before the Xid), so the replica applies both or
    neither; a rolled-back end is not logged at all."""
    p = pair.primary.connect()
    query(p, "CREATE TABLE events (id INT) ENGINE=QUEUE")
    query(p, "CREATE TABLE results (id INT PRIMARY KEY) ENGINE=InnoDB")
    assert value(p, "SELECT queue_subscribe('events', 'a')") == 1
    assert value(p, "SELECT queue_subscribe('events', 'b')") == 1
    query(p, "INSERT INTO events VALUES (1), (2)")

    def consume(source, commit):
        query(p, "BEGIN")
        assert value(p, f"SELECT queue_wait('{source}', 0)") == 1
        row = value(p, "SELECT id FROM events")
        query(p, f"INSERT INTO results VALUES ({row})")
        assert value(p, "SELECT queue_end()") == 1
        query(p, "COMMIT" if commit else "ROLLBACK")
        return row

    assert consume("events@a", commit=False) == 1
    assert consume("events@a", commit=True) == 1  # given back by the rollback
    pair.sync()
    assert pair.replica.sql("SELECT id FROM test.results") == [(1,)]
    assert pending(pair.replica) == pending(pair.primary) == {"a": 1, "b": 2}
    # b's end in a transaction is the row's last: its removal replicates with it.
    query(p, "DELETE FROM results")
    assert consume("events@b", commit=True) == 1
    pair.sync()
    assert rows_with_ids(pair.replica) == rows_with_ids(pair.primary) == [(2, 2)]
    assert pending(pair.replica) == pending(pair.primary) == {"a": 1, "b": 1}
    ends = [g for g in _binlog_groups(pair.primary) if any("queue_apply_sub_end" in i for _, i in g)]
    assert len(ends) == 2, ends
    for g in ends:  # in the transaction of the InnoDB row (statement or rows events), before its Xid
        at = [i for i, (_, info) in enumerate(g) if "queue_apply_sub_end" in info][0]
        assert any("results" in info or k == "Write_rows_v1" for k, info in g[:at]) and g[-1][0] == "Xid", g
    assert "'a','1',''" in str(ends[0]) and "'b','1','1'" in str(ends[1])
    assert pair.status()["Slave_SQL_Running"] == "Yes"


def test_apply_functions_refuse_bad_input_naming_the_table(pair):
    p = pair.primary.connect()
    query(p, "CREATE TABLE events (id INT) ENGINE=QUEUE")
    # An end logged after its subscription's drop (another connection's drop, whose statement
    # ended first): nothing to end, the removals it names still apply.
    query(p, "INSERT INTO events VALUES (1), (2)")
    assert value(p, "SELECT queue_apply_sub_end('test', 'events', 'nope', '1', '2')") == 1
    assert query(p, "SELECT id FROM events") == [(1,)]
    expect_error(p, "SELECT queue_apply_sub_end('test', 'events', '', '3,2', '')", "events", "increasing row ids")
    expect_error(p, "SELECT queue_apply_subscribe('test', 'events', 's', NULL, 'x')", "events", "not a row id")
    expect_error(p, "SELECT queue_apply_subscribe('test', 'events')", "takes 5 arguments")
    # Applied twice (an applier that crashed before saving its position): the second is a no-op.
    assert value(p, "SELECT queue_apply_subscribe('test', 'events', 's', '', '7')") == 1
    assert value(p, "SELECT queue_apply_subscribe('test', 'events', 's', '', '7')") == 1
    expect_error(p, "SELECT queue_apply_subscribe('test', 'events', 's', '', '8')", "events",
                 "exists with another start or condition")
    assert value(p, "SELECT queue_apply_unsubscribe('test', 'events', 's')") == 1
    assert value(p, "SELECT queue_apply_unsubscribe('test', 'events', 's')") == 1


def test_concurrent_consumers_of_two_subscriptions_keep_the_replica_a_copy(pair):
    """Under a producer and two consumers per subscription at once (each end logged at the end
    of its own statement, in whatever order the connections finish), the replica holds the
    primary's rows under its ids and its applier never stops; promoted, it delivers each row
    once per matching subscription overall."""
    p = pair.primary.connect()
    query(p, "CREATE TABLE events (id INT, kind VARCHAR(20)) ENGINE=QUEUE")
    assert value(p, "SELECT queue_subscribe('events', 'billing')") == 1
    assert value(p, "SELECT queue_subscribe('events', 'email', 'kind <> ''refund''')") == 1
    kinds = ("order", "signup", "refund")
    n = 400
    matches = {"billing": set(range(1, n + 1)), "email": {i for i in range(1, n + 1) if kinds[i % 3] != "refund"}}
    ended = {"billing": [], "email": []}
    lock = threading.Lock()
    produced = threading.Event()
    errors = []

    def produce():
        try:
            c = pair.primary.connect()
            for start in range(1, n + 1, 10):
                query(c, "INSERT INTO events VALUES " +
                      ",".join(f"({i}, '{kinds[i % 3]}')" for i in range(start, start + 10)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            produced.set()

    def consume(sub, batch):
        try:
            c = pair.primary.connect()
            mine = 0
            while mine < len(matches[sub]) // 3:
                if batch:
                    got = [r[0] for r in query(c, f"SELECT id FROM events WHERE queue_wait_batch('events@{sub}', 7, 0)")]
                else:
                    got = [r[0] for r in query(c, f"SELECT id FROM events WHERE queue_wait('events@{sub}', 0)")]
                if not got:
                    value(c, "SELECT queue_end()")
                    if produced.is_set():
                        break
                    continue
                assert value(c, "SELECT queue_end()") == 1
                with lock:
                    ended[sub] += got
                mine += len(got)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=produce)] + [
        threading.Thread(target=consume, args=(sub, batch)) for sub in ("billing", "email") for batch in (False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    pair.sync()
    assert pair.status()["Slave_SQL_Running"] == "Yes"
    assert subscriptions(pair.replica) == subscriptions(pair.primary)
    assert rows_with_ids(pair.replica) == rows_with_ids(pair.primary)
    assert pending(pair.replica)["billing"] == pending(pair.primary)["billing"]

    promote(pair)
    r = pair.replica.connect()
    for sub in ("billing", "email"):
        assert len(ended[sub]) == len(set(ended[sub])), f"{sub}: a row delivered twice on the primary"
        after = drain(r, f"events@{sub}")
        assert not set(after) & set(ended[sub]), f"{sub}: rows acknowledged on the primary delivered again"
        assert sorted(after + ended[sub]) == sorted(matches[sub]), f"{sub}: not every row exactly once"
    wait_until(lambda: pair.replica.value("SELECT COUNT(*) FROM test.events") == 0, what="every row decided")


def test_a_chained_replica_gets_the_subscriptions_its_replica_applied(server_factory):
    """primary -> middle (log-bin, log_slave_updates) -> last: the middle logs again each
    subscription change it applies, so the last replica has the same subscriptions, rows and
    ends (and the primary's ids)."""
    chain = Chain(server_factory)
    pair, last = chain.pair, chain.last
    try:
        c = pair.primary.connect()
        query(c, "CREATE TABLE events (id INT, kind VARCHAR(20)) ENGINE=QUEUE")
        assert value(c, "SELECT queue_subscribe('events', 'billing')") == 1
        assert value(c, "SELECT queue_subscribe('events', 'email', 'kind = ''signup''')") == 1
        assert value(c, "SELECT queue_subscribe('events', 'audit')") == 1
        query(c, "INSERT INTO events VALUES (1, 'order'), (2, 'signup'), (3, 'order'), (4, 'signup')")
        assert take_and_end(c, "events@billing", 3) == [1, 2, 3]
        assert take_and_end(c, "events@email", 1) == [2]
        assert value(c, "SELECT queue_unsubscribe('events', 'audit')") == 1  # frees rows 1 and 2
        chain.sync()
        want = subscriptions(pair.primary)
        assert [s[0] for s in want] == ["billing", "email"]
        assert subscriptions(pair.replica) == subscriptions(last) == want
        assert rows_with_ids(pair.primary) == [(3, 3), (4, 4)]
        assert rows_with_ids(pair.replica) == rows_with_ids(last) == rows_with_ids(pair.primary)
        assert pending(last)["billing"] == 1
    finally:
        chain.destroy()


def test_a_primary_killed_under_subscription_consumers_fails_over_keeping_their_acknowledged_ends(server_factory):
    """Semi-sync (AFTER_SYNC) primary and replica, two consumers per subscription on the
    primary, kill -9 of the primary, the replica promoted (the runbook): no row whose
    queue_end() returned comes to that subscription again, every matching row is either
    acknowledged, or delivered on the new primary, or was in flight (taken, its end not
    answered) at the kill; none comes twice."""
    cluster = Cluster(server_factory, replicas=1)
    try:
        primary, replica = cluster.servers
        c = primary.connect()
        query(c, "CREATE TABLE events (id INT, kind VARCHAR(20)) ENGINE=QUEUE")
        assert value(c, "SELECT queue_subscribe('events', 'billing')") == 1
        assert value(c, "SELECT queue_subscribe('events', 'email', 'kind = ''signup''')") == 1
        kinds = ("order", "signup", "refund")
        n = 3000
        for start in range(1, n + 1, 250):
            query(c, "INSERT INTO events VALUES " +
                  ",".join(f"({i}, '{kinds[i % 3]}')" for i in range(start, start + 250)))
        matches = {"billing": set(range(1, n + 1)), "email": {i for i in range(1, n + 1) if kinds[i % 3] == "signup"}}
        taken = {"billing": set(), "email": set()}
        acked = {"billing": set(), "email": set()}
        lock = threading.Lock()
        stop = threading.Event()

        def consume(sub):
            try:
                cc = primary.connect()
                while not stop.is_set():
                    got = query(cc, f"SELECT id FROM events WHERE queue_wait('events@{sub}', 0)")
                    if not got:
                        break
                    with lock:
                        taken[sub].add(got[0][0])
                    if value(cc, "SELECT queue_end()") == 1:
                        with lock:
                            acked[sub].add(got[0][0])
            except (pymysql.MySQLError, OSError, AttributeError):
                pass  # the primary died

        workers = [threading.Thread(target=consume, args=(sub,)) for sub in ("billing", "email") for _ in range(2)]
        for w in workers:
            w.start()
        wait_until(lambda: len(acked["billing"]) >= 100 and len(acked["email"]) >= 30, what="consumers under way")
        primary.kill9()
        stop.set()
        for w in workers:
            w.join(120)

        new_primary = cluster.promote_most_advanced([replica])
        # No replica of its own here: its commits would wait for one (semi-sync's timeout).
        new_primary.sql("SET GLOBAL rpl_semi_sync_master_enabled = OFF")
        r = new_primary.connect()
        for sub in ("billing", "email"):
            after = take_and_end(r, f"events@{sub}", 10) + drain(r, f"events@{sub}")
            assert len(after) == len(set(after)), f"{sub}: a row delivered twice on the new primary"
            back = set(after) & acked[sub]
            assert not back, f"{sub}: acknowledged ends came back: {sorted(back)[:10]}"
            assert set(after) <= matches[sub], f"{sub}: rows outside its condition"
            missing = matches[sub] - set(after) - acked[sub] - (taken[sub] - acked[sub])
            assert not missing, f"{sub}: rows neither ended nor delivered: {sorted(missing)[:10]}"
    finally:
        cluster.destroy()


@pytest.mark.parametrize("finish", ["ROLLBACK", "COMMIT"])
def test_a_replica_applies_a_transactional_end_at_its_applier_transactions_commit(pair, finish):
    """queue_apply_sub_end inside a transaction (as the applier runs a primary's transactional
    end, in its event group) takes effect at that transaction's commit and not at all if it
    rolls back, as the primary's end did (run by hand here, on the replica's own data)."""
    r = pair.replica.connect()
    query(r, "SET SESSION sql_log_bin = 0")
    query(r, "CREATE TABLE events (id INT) ENGINE=QUEUE")
    assert value(r, "SELECT queue_apply_subscribe('test', 'events', 'a', '', '1')") == 1
    assert value(r, "SELECT queue_apply_subscribe('test', 'events', 'b', '', '1')") == 1
    query(r, "INSERT INTO events VALUES (1), (2)")
    query(r, "BEGIN")
    assert value(r, "SELECT queue_apply_sub_end('test', 'events', 'a', '1,2', '')") == 1
    assert pending(pair.replica)["a"] == 2  # not before the commit
    query(r, finish)
    assert pending(pair.replica) == ({"a": 2, "b": 2} if finish == "ROLLBACK" else {"a": 0, "b": 2})
    query(r, "BEGIN")
    assert value(r, "SELECT queue_apply_sub_end('test', 'events', 'b', '1', '1')") == 1
    query(r, "COMMIT")
    assert [i for i, _ in rows_with_ids(pair.replica)] == [2]  # the removal the log names, with b's end
    assert pending(pair.replica)["b"] == 1
