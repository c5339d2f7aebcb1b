"""A replica of QUEUE tables, over real MariaDB replication (a primary and a replica on
127.0.0.1): what docs/replication.md states. Every removal of a row is in the binary log, so
the replica holds the primary's rows under the same ids; an INSERT's rows appear only after its binlog write, so no
DELETE of a row reaches the log before its INSERT (tests/integration/test_binlog.py checks what
is logged)."""
import re
import subprocess
import time

import pymysql
import pytest

from replication_pair import Chain, Pair
from sqlcheck import Background, expect_error, query, value, wait_until

@pytest.fixture(scope="module")
def pair(server_factory):
    p = Pair(server_factory)
    yield p
    p.destroy()


def rows(server, table):
    return [r[0] for r in server.sql(f"SELECT id FROM test.{table}")]


def rows_with_ids(server, table):
    """(row id, id column) of every row, in queue order, as the server holds them."""
    return server.sql(f"SELECT queue_scan_rowid(), id FROM test.{table}")


@pytest.mark.parametrize("binlog_format", ["ROW", "MIXED"])
def test_a_replica_removes_every_row_consumed_on_the_primary(pair, binlog_format):
    """Every way a row leaves the queue on the primary reaches the replica: the end inside
    queue_wait, queue_end, a batch's end, queue_take_dead's end, a DELETE, a transaction's
    consumption (and not a rolled-back one's). Same rows, same ids."""
    table = f"jobs_{binlog_format.lower()}"
    producer = pair.primary.connect()
    consumer = pair.primary.connect()
    for c in (producer, consumer):
        query(c, "SET SESSION binlog_format = %s", (binlog_format,))
    query(producer, f"CREATE TABLE {table} (id INT NOT NULL) ENGINE=QUEUE MAX_DELIVERIES=1")
    query(producer, f"INSERT INTO {table} VALUES (1), (2), (3), (4), (5), (6), (7), (8), (9), (10)")
    for expected in (1, 2, 3):  # each wait ends the row before
        assert query(consumer, f"SELECT id FROM {table} WHERE queue_wait('{table}', 0)") == [(expected,)]
    assert value(consumer, "SELECT queue_end()") == 1
    query(producer, f"DELETE FROM {table} WHERE id = 4")
    assert value(consumer, f"SELECT queue_wait_batch('{table}', 2, 0)") == 2  # rows 5, 6
    assert value(consumer, "SELECT queue_end()") == 1
    assert query(consumer, f"SELECT id FROM {table} WHERE queue_wait('{table}', 0)") == [(7,)]
    assert value(consumer, "SELECT queue_abort()") == 1  # MAX_DELIVERIES=1: row 7 is dead now
    assert query(consumer, f"SELECT id FROM {table} WHERE queue_take_dead('{table}')") == [(7,)]
    assert value(consumer, "SELECT queue_end()") == 1
    query(consumer, "BEGIN")
    assert query(consumer, f"SELECT id FROM {table} WHERE queue_wait('{table}', 0)") == [(8,)]
    assert value(consumer, "SELECT queue_end()") == 1
    query(consumer, "COMMIT")
    query(consumer, "BEGIN")
    assert query(consumer, f"SELECT id FROM {table} WHERE queue_wait('{table}', 0)") == [(9,)]
    assert value(consumer, "SELECT queue_end()") == 1
    query(consumer, "ROLLBACK")  # row 9 stays
    query(producer, f"INSERT INTO {table} VALUES (11)")
    pair.sync()
    assert [r[1] for r in rows_with_ids(pair.primary, table)] == [9, 10, 11]
    assert rows_with_ids(pair.replica, table) == rows_with_ids(pair.primary, table)


def test_a_replica_holds_the_primarys_queue_under_load(pair):
    """Producers and consumers (autocommit and transactions) at once: the replica holds the
    primary's rows, ids and all."""
    pair.primary.sql("CREATE TABLE test.load_jobs (id INT NOT NULL, p VARCHAR(40) NOT NULL) ENGINE=QUEUE")

    def produce(k):
        c = pair.primary.connect()
        for i in range(300):
            query(c, "INSERT INTO load_jobs VALUES (%s, REPEAT('x', %s))", (k * 1000 + i, i % 37))

    def consume(in_transaction):
        c = pair.primary.connect()
        taken = 0
        while taken < 250:
            if in_transaction:
                query(c, "BEGIN")
            if query(c, "SELECT id FROM load_jobs WHERE queue_wait('load_jobs', 1)"):
                taken += 1
                query(c, "SELECT queue_end()")
            if in_transaction:
                query(c, "COMMIT")
        query(c, "SELECT queue_end()") if value(c, "SELECT queue_rowid()") else None

    workers = [Background(produce, k) for k in range(3)] + [Background(consume, t) for t in (False, True)]
    for w in workers:
        w.join(300)
    pair.sync()
    primary = rows_with_ids(pair.primary, "load_jobs")
    assert len(primary) == 900 - 500
    assert rows_with_ids(pair.replica, "load_jobs") == primary
    assert pair.primary.sql("SELECT id, p FROM test.load_jobs") == pair.replica.sql("SELECT id, p FROM test.load_jobs")


def test_purged_and_redriven_dead_rows_reach_the_replica(pair):
    """queue_purge_dead() and queue_redrive_dead() with the binary log on: both take effect at
    their transaction's commit and reach the replica by row id; a redrive's copies get their
    ids at the commit, in the log's order, on both servers, keep their age, and keep their
    DEDUP_COLUMN keys without being taken for duplicates. (queue_redrive_dead was refused with
    the binary log on before.)"""
    pair.primary.sql("CREATE TABLE test.dead_jobs (id INT NOT NULL, k INT) ENGINE=QUEUE MAX_DELIVERIES=1 "
                     "DEDUP_COLUMN='k'")
    c = pair.primary.connect()
    query(c, "INSERT INTO dead_jobs VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
    for _ in range(3):
        query(c, "SELECT queue_wait('dead_jobs', 0)")
        query(c, "SELECT queue_abort()")  # dead at once
    assert value(c, "SELECT queue_purge_dead('dead_jobs', 1)") == 1
    query(c, "BEGIN")
    assert value(c, "SELECT queue_purge_dead('dead_jobs')") == 2
    query(c, "ROLLBACK")  # the purge with it
    query(c, "BEGIN")
    assert value(c, "SELECT queue_redrive_dead('dead_jobs')") == 2
    query(c, "ROLLBACK")  # the redrive with it: still dead
    assert pair.primary.sql("SELECT id, queue_scan_state() FROM test.dead_jobs") == [
        (2, "dead"), (3, "dead"), (4, "queued")]
    query(c, "INSERT INTO dead_jobs VALUES (5, NULL)")
    assert value(c, "SELECT queue_redrive_dead('dead_jobs')") == 2
    query(c, "INSERT INTO dead_jobs VALUES (6, 2)")  # the copy of 2 keeps its key: a duplicate
    pair.sync()
    assert [r[1] for r in rows_with_ids(pair.primary, "dead_jobs")] == [4, 5, 2, 3]
    assert rows_with_ids(pair.replica, "dead_jobs") == rows_with_ids(pair.primary, "dead_jobs")
    states = "SELECT id, queue_scan_state() FROM test.dead_jobs"
    assert pair.primary.sql(states) == [(4, "queued"), (5, "queued"), (2, "queued"), (3, "queued")]
    assert pair.replica.sql(states) == pair.primary.sql(states)
    st = pair.status()
    assert st["Last_SQL_Errno"] == 0, st
    # Dead marks stay local: the replica never saw a row die, a promoted one would queue it.
    query(c, "SELECT queue_wait('dead_jobs', 0)")
    query(c, "SELECT queue_abort()")
    pair.sync()
    assert pair.primary.sql(states)[0] == (4, "dead")
    assert pair.replica.sql(states)[0] == (4, "queued")


@pytest.mark.parametrize("ddl", ["ALTER TABLE {t} ADD COLUMN x INT", "ALTER TABLE {t} ENGINE=QUEUE",
                                 "OPTIMIZE TABLE {t}"])
def test_every_end_across_a_copying_alter_or_optimize_reaches_the_replica(pair, ddl):
    """Rows owned (one, a batch, a dead row taken with queue_take_dead) and dead rows across a
    copying ALTER TABLE or OPTIMIZE, then ended every way: queue_end, the end inside the next
    wait, a batch's end, queue_take_dead's end, queue_purge_dead, queue_redrive_dead, and the
    expiry of MESSAGE_TTL. The replica holds the primary's rows, ids and all. (Issue 40, item 1:
    an end after the ALTER was acknowledged with 1 and never logged; the replica kept the row.)"""
    t = "across_" + ddl.split()[0].lower() + ("_engine" if "ENGINE" in ddl else "")
    ttl = "ttl_" + t
    p = pair.primary
    p.sql(f"CREATE TABLE test.{t} (id INT NOT NULL, g VARCHAR(8)) ENGINE=QUEUE MAX_DELIVERIES=1 "
          "MESSAGE_GROUP_COLUMN='g'")
    p.sql(f"INSERT INTO test.{t} VALUES " + ", ".join(f"({i}, 'g{i}')" for i in range(1, 13)))
    x, e, w, b, d = (p.connect() for _ in range(5))
    for i in (1, 2, 3):  # dead at once
        assert query(x, f"SELECT id FROM {t} WHERE queue_wait('{t}', 0)") == [(i,)]
        assert value(x, "SELECT queue_abort()") == 1
    assert query(e, f"SELECT id FROM {t} WHERE queue_wait('{t}', 0)") == [(4,)]
    assert query(w, f"SELECT id FROM {t} WHERE queue_wait('{t}', 0)") == [(5,)]
    assert value(b, f"SELECT queue_wait_batch('{t}', 2, 0)") == 2  # 6, 7
    assert query(d, f"SELECT id FROM {t} WHERE queue_take_dead('{t}')") == [(1,)]
    p.sql(f"CREATE TABLE test.{ttl} (id INT NOT NULL) ENGINE=QUEUE MESSAGE_TTL=2")
    p.sql(f"INSERT INTO test.{ttl} VALUES (1), (2)")
    pair.sync()
    p.sql(ddl.format(t=f"test.{t}"))
    p.sql(ddl.format(t=f"test.{ttl}"))
    assert value(e, "SELECT queue_end()") == 1
    assert query(w, f"SELECT id FROM {t} WHERE queue_wait('{t}', 0)") == [(8,)]  # ends 5
    assert value(b, "SELECT queue_end()") == 1
    assert value(d, "SELECT queue_end()") == 1
    assert value(x, f"SELECT queue_purge_dead('{t}', 1)") == 1  # 2
    assert value(x, f"SELECT queue_redrive_dead('{t}')") == 1   # 3, queued again as a copy
    assert value(w, "SELECT queue_end()") == 1
    # Expired rows look gone once claimed; their removal is logged a moment later.
    wait_until(lambda: _stats(p, ttl)["rows_expired"] == 2, timeout=30, what="the expiry after the DDL")
    for c in (x, e, w, b, d):
        c.close()
    primary = rows_with_ids(p, t)
    assert [r[1] for r in primary] == [9, 10, 11, 12, 3]
    pair.sync()
    assert rows_with_ids(pair.replica, t) == primary
    assert rows(pair.replica, ttl) == []
    assert pair.status()["Last_SQL_Errno"] == 0
    p.sql(f"DROP TABLE test.{t}, test.{ttl}")


def _stats(server, table):
    return server.queue_stats(f"test.{table}")


def test_an_expiry_reaches_the_replica_as_the_removal_of_those_rows(server_factory):
    """MESSAGE_TTL with the binary log on: the primary's expiry is a transaction of its own,
    logged as the removal of the expired rows by id (queue_apply_removal). A replica (read-only,
    or applying a log) expires nothing itself, so at every point of the log it holds what the
    primary held there: one that lags keeps a row past its TTL until the primary's expiry of
    it arrives. Promoted, it expires rows itself again (and logs them for its own replicas)."""
    pair = Pair(server_factory, replica_args=["--log-bin=replica-bin", "--log-slave-updates"])
    try:
        p, r = pair.primary, pair.replica
        p.sql("CREATE TABLE test.ttl_jobs (id INT NOT NULL) ENGINE=QUEUE MESSAGE_TTL=2")
        p.sql("INSERT INTO test.ttl_jobs VALUES (1), (2)")
        pair.sync()
        start = p.sql("SHOW MASTER STATUS")[0][:2]
        r.sql("STOP SLAVE SQL_THREAD")
        r.sql("SET GLOBAL read_only = ON")  # a replica whose applier stopped expires nothing either
        try:
            wait_until(lambda: rows(p, "ttl_jobs") == [], timeout=10, what="the primary's expiry")
            time.sleep(1.5)  # the replica's rows are past their TTL by then
            assert rows(r, "ttl_jobs") == [1, 2]
        finally:
            r.sql("START SLAVE SQL_THREAD")
        pair.sync()
        assert rows_with_ids(r, "ttl_jobs") == rows_with_ids(p, "ttl_jobs")
        events = p.sql(f"SHOW BINLOG EVENTS IN '{start[0]}' FROM {start[1]}")
        removals = [e[5] for e in events if "queue_apply_removal('test','ttl_jobs'" in e[5]]
        assert removals and re.search(r"'1:\d+:\d+,2:\d+:\d+'\)$", removals[0]), events
        assert _stats(p, "ttl_jobs")["rows_expired"] == 2
        assert _stats(r, "ttl_jobs")["rows_expired"] == 0  # removed as the log said, not expired
        # With its applier running and read_only off the replica still leaves expiry to the log.
        r.sql("SET GLOBAL read_only = OFF")
        time.sleep(1.2)  # the engine looks at read_only and the applier every second
        p.sql("INSERT INTO test.ttl_jobs VALUES (3)")
        wait_until(lambda: rows(p, "ttl_jobs") == [], timeout=10, what="the primary's expiry of row 3")
        pair.sync()
        assert rows(r, "ttl_jobs") == [] and _stats(r, "ttl_jobs")["rows_expired"] == 0
        # Promoted: it expires rows itself.
        r.sql("STOP SLAVE")
        r.sql("RESET SLAVE ALL")
        at = r.sql("SHOW MASTER STATUS")[0][:2]
        r.sql("INSERT INTO test.ttl_jobs VALUES (4)")
        wait_until(lambda: rows(r, "ttl_jobs") == [], timeout=10, what="the promoted replica's expiry")
        # Counted once its removal commits (after the binary log's sync): the rows vanish before.
        wait_until(lambda: _stats(r, "ttl_jobs")["rows_expired"] == 1, timeout=10, what="the expiry's commit")
        logged = [e[5] for e in r.sql(f"SHOW BINLOG EVENTS IN '{at[0]}' FROM {at[1]}")]
        assert any("queue_apply_removal('test','ttl_jobs'" in e for e in logged), logged
    finally:
        pair.destroy()


def test_a_replica_keeps_and_drops_the_duplicates_the_primary_did(pair):
    """DEDUP_COLUMN decides on the primary: a replica keeps each row the primary kept and drops
    each row it dropped (logged with the INSERT's transaction), whatever its own window says.
    Here the replica applies late: rows the primary took one window apart reach it at once."""
    p = pair.primary
    p.sql("CREATE TABLE test.unique_jobs (id INT NOT NULL, k VARCHAR(8)) ENGINE=QUEUE "
          "DEDUP_COLUMN='k' DEDUP_WINDOW=1")
    pair.sync()
    pair.replica.sql("STOP SLAVE SQL_THREAD")
    try:
        c = p.connect()
        query(c, "INSERT INTO unique_jobs VALUES (1, 'a')")
        query(c, "INSERT INTO unique_jobs VALUES (2, 'a')")  # dropped: within the window
        query(c, "INSERT INTO unique_jobs VALUES (3, 'b'), (4, 'b'), (5, 'c')")  # 4 dropped
        query(c, "BEGIN")
        query(c, "INSERT INTO unique_jobs VALUES (6, 'c'), (7, 'd')")  # 6 dropped at the commit
        query(c, "COMMIT")
        time.sleep(1.5)  # the window has passed on the primary
        query(c, "INSERT INTO unique_jobs VALUES (8, 'a'), (9, 'a')")  # 8 kept, 9 dropped
    finally:
        pair.replica.sql("START SLAVE SQL_THREAD")
    pair.sync()
    assert [r[1] for r in rows_with_ids(p, "unique_jobs")] == [1, 3, 5, 7, 8]
    assert rows_with_ids(pair.replica, "unique_jobs") == rows_with_ids(p, "unique_jobs")
    c = p.connect()
    for expected in (1, 3, 5, 7, 8):  # and consuming them removes the same rows there
        assert query(c, "SELECT id FROM unique_jobs WHERE queue_wait('unique_jobs', 0)") == [(expected,)]
    assert value(c, "SELECT queue_end()") == 1
    pair.sync()
    assert rows(pair.replica, "unique_jobs") == []


def test_a_replica_dates_a_row_from_the_primarys_insert(pair):
    """A replica gives a row the primary's insert time (its binary log event's, to the second,
    never earlier), not the time it applied it: a replica applying late counts MESSAGE_TTL, the
    dedup window and the row's age from the primary's insert, so it expires the row when the
    primary does, and after a failover the row's TTL goes on, not over."""
    p = pair.primary
    p.sql("CREATE TABLE test.dated (id INT NOT NULL) ENGINE=QUEUE")
    p.sql("CREATE TABLE test.dated_ttl (id INT NOT NULL) ENGINE=QUEUE MESSAGE_TTL=3")
    pair.sync()
    pair.replica.sql("STOP SLAVE SQL_THREAD")
    try:
        p.sql("INSERT INTO test.dated VALUES (1)")
        p.sql("INSERT INTO test.dated_ttl VALUES (1)")
        time.sleep(3.5)
    finally:
        pair.replica.sql("START SLAVE SQL_THREAD")
    pair.sync()
    age = pair.replica.value("SELECT OLDEST_AGE_MS FROM information_schema.QUEUE_TABLES "
                             "WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'dated'")
    assert age >= 2000, age  # applied just now; inserted 3.5 s ago on the primary
    # Applied 3.5 s after its insert with a TTL of 3 s: it expires at once (a row dated from its
    # apply would stay 3 s more).
    wait_until(lambda: rows(pair.replica, "dated_ttl") == [], timeout=2.5, what="the replica's expiry")


def test_a_replica_takes_over_a_relay_without_taking_its_replays(pair):
    """Rows relayed with queue_set_srcid (q4m-forward): the replica gets the rows, drops the
    replays the primary dropped, and records the source's last row id, so that after a
    failover a forwarder's resend of the rows it had in flight is dropped there too."""
    p = pair.primary
    p.sql("CREATE TABLE test.relayed (id INT NOT NULL, k INT) ENGINE=QUEUE DEDUP_COLUMN='k'")
    c = p.connect()
    query(c, "SELECT queue_set_srcid(7, 'a', 100, 101)")
    query(c, "INSERT INTO relayed VALUES (1, NULL), (2, NULL)")
    query(c, "SELECT queue_set_srcid(7, 'a', 101, 102, 103)")  # 101 was received: a replay
    query(c, "INSERT INTO relayed VALUES (2, NULL), (3, 1), (4, 1)")  # and 4 repeats 3's key
    query(c, "SELECT queue_set_srcid(7, 'a', 103)")
    query(c, "INSERT INTO relayed VALUES (4, 1)")  # every row a replay
    query(c, "SELECT queue_set_srcid(8, 'a', 5)")
    # The declared row first, then plain ones: 5 repeats 0's key (dropped at the commit).
    query(c, "INSERT INTO relayed VALUES (0, 9), (5, 9), (6, NULL)")
    pair.sync()
    assert [r[1] for r in rows_with_ids(p, "relayed")] == [1, 2, 3, 0, 6]
    assert rows_with_ids(pair.replica, "relayed") == rows_with_ids(p, "relayed")
    # The replica taking over: the forwarder resends source row 103 (and 104 is new).
    r = pair.replica.connect()
    query(r, "SELECT queue_set_srcid(7, 'a', 103, 104)")
    query(r, "INSERT INTO relayed VALUES (4, 2), (7, 3)")
    query(r, "SELECT queue_set_srcid(8, 'a', 5)")
    query(r, "INSERT INTO relayed VALUES (0, NULL)")
    assert [x[1] for x in rows_with_ids(pair.replica, "relayed")] == [1, 2, 3, 0, 6, 7]


def test_relayed_rows_take_their_ids_in_binary_log_order(pair):
    """A relay (queue_set_srcid) and plain producers write one table at once. Relayed rows
    are staged like the others and get their ids at the commit, in the binary log's order,
    so the replica holds every row under the primary's id. (Before, they took ids when their
    INSERT ran, ahead of their binlog write: a plain INSERT committed in between got its
    id on the replica, and the ids of the two differed there.)"""
    p = pair.primary
    p.sql("CREATE TABLE test.mixed (id INT NOT NULL, src INT) ENGINE=QUEUE")
    rounds, batch = 60, 8

    def relay():
        c = p.connect()
        for n in range(rounds):
            ids = ", ".join(str(n * batch + i + 1) for i in range(batch))
            query(c, f"SELECT queue_set_srcid(3, 'a', {ids})")
            query(c, "INSERT INTO mixed VALUES " + ", ".join(f"({n * batch + i}, 1)" for i in range(batch)))
        return rounds * batch

    def produce(offset):
        c = p.connect()
        for n in range(rounds):
            query(c, "INSERT INTO mixed VALUES " + ", ".join(f"({offset + n * 4 + i}, 0)" for i in range(4)))
        return rounds * 4

    workers = [Background(relay), Background(produce, 100000), Background(produce, 200000)]
    assert sum(w.join() for w in workers) == rounds * (batch + 8)
    pair.sync()
    on_primary = rows_with_ids(p, "mixed")
    assert len(on_primary) == rounds * (batch + 8)
    assert rows_with_ids(pair.replica, "mixed") == on_primary
    assert pair.replica.value("SELECT COUNT(*) FROM test.mixed WHERE src = 1") == rounds * batch


def test_rows_relayed_in_a_transaction_reach_the_replica_with_it(pair):
    """BEGIN; queue_set_srcid(); INSERT ...; COMMIT: the relayed rows, the plain row and the
    source's record reach the replica together; a rolled-back relay leaves nothing there."""
    p = pair.primary
    p.sql("CREATE TABLE test.txn_relay (id INT NOT NULL) ENGINE=QUEUE")
    c = p.connect()
    query(c, "BEGIN")
    query(c, "SELECT queue_set_srcid(4, 'a', 10, 11)")
    query(c, "INSERT INTO txn_relay VALUES (10), (11)")
    query(c, "ROLLBACK")
    query(c, "BEGIN")
    query(c, "SELECT queue_set_srcid(4, 'a', 10, 11)")
    query(c, "INSERT INTO txn_relay VALUES (10), (11)")
    query(c, "INSERT INTO txn_relay VALUES (0)")
    query(c, "SELECT queue_set_srcid(4, 'a', 11, 12)")  # 11 was received earlier in it
    query(c, "INSERT INTO txn_relay VALUES (11), (12)")
    query(c, "COMMIT")
    assert [r[2] for r in query(c, "SHOW WARNINGS")] == [
        "queue_set_srcid: 1 of 4 rows of source 4 were already received by 'test.txn_relay' (row ids 11 to 11); "
        "dropped (last received: row 11)"]
    pair.sync()
    assert [r[1] for r in rows_with_ids(p, "txn_relay")] == [10, 11, 0, 12]
    assert rows_with_ids(pair.replica, "txn_relay") == rows_with_ids(p, "txn_relay")
    r = pair.replica.connect()  # after a failover: the resend of 12 is a replay there
    query(r, "SELECT queue_set_srcid(4, 'a', 12, 13)")
    query(r, "INSERT INTO txn_relay VALUES (12), (13)")
    assert [x[1] for x in rows_with_ids(pair.replica, "txn_relay")] == [10, 11, 0, 12, 13]


def test_a_delete_reaches_the_replica_by_id_not_by_bytes(pair):
    """Two rows with the same bytes, the first owned by a consumer: a DELETE on the primary
    removes the second (it sees only that one). A row event would have the replica remove the
    first row with those bytes; the removal is logged by id instead, so the consumer's end of
    the first row applies there too. (Before: the replica removed the owned row and stopped at
    its end with "no such row".)"""
    pair.primary.sql("CREATE TABLE test.twins (id INT NOT NULL) ENGINE=QUEUE")
    pair.primary.sql("INSERT INTO test.twins VALUES (7), (7), (8)")
    consumer, deleter = pair.primary.connect(), pair.primary.connect()
    assert query(consumer, "SELECT id FROM twins WHERE queue_wait('twins', 0)") == [(7,)]
    query(deleter, "DELETE FROM twins WHERE id = 7 LIMIT 1")
    assert value(consumer, "SELECT queue_end()") == 1
    pair.sync()
    assert pair.status()["Last_SQL_Errno"] == 0, pair.status()
    assert rows_with_ids(pair.replica, "twins") == rows_with_ids(pair.primary, "twins") == [(3, 8)]
    # In a transaction: a row it inserted and deletes again (logged as rows, as its INSERT
    # was) and a committed one (logged by id), in one DELETE.
    query(deleter, "BEGIN")
    query(deleter, "INSERT INTO twins VALUES (8), (9)")
    query(deleter, "DELETE FROM twins WHERE id = 8")
    query(deleter, "COMMIT")
    pair.sync()
    assert rows_with_ids(pair.replica, "twins") == rows_with_ids(pair.primary, "twins") == [(4, 9)]  # the deleted new row took no id


def test_a_replica_whose_queue_differs_stops_naming_the_row(server_factory):
    """A row the replica does not hold (removed there by hand) cannot be removed by the
    primary's log: the applier stops with an error naming the table and row, instead of
    removing another row."""
    p = Pair(server_factory)
    try:
        p.primary.sql("CREATE TABLE test.diverged (id INT NOT NULL) ENGINE=QUEUE")
        p.primary.sql("INSERT INTO test.diverged VALUES (1), (2)")
        p.sync()
        c = p.replica.connect()
        query(c, "SET SESSION sql_log_bin = 0")
        query(c, "DELETE FROM diverged WHERE id = 1")
        consumer = p.primary.connect()
        assert query(consumer, "SELECT id FROM diverged WHERE queue_wait('diverged', 0)") == [(1,)]
        assert value(consumer, "SELECT queue_end()") == 1
        st = p.wait_stopped()
        assert "queue_apply_removal(): table 'test.diverged': row 1: no such row here" in st["Last_SQL_Error"], st
        assert rows(p.replica, "diverged") == [2]
    finally:
        p.destroy()


def test_the_removal_statement_refuses_what_is_not_a_list_of_rows(pair):
    pair.primary.sql("CREATE TABLE test.apply_args (id INT NOT NULL) ENGINE=QUEUE")
    c = pair.primary.connect()
    for bad in ("1:4:5,", "1:4", "1:4:x", "0:4:5", "1:4:5;2:4:5", "", "1:99999999999:5"):
        expect_error(c, f"SELECT queue_apply_removal('test', 'apply_args', '{bad}')",
                     "queue_apply_removal(): argument 3", "expected a list")
    expect_error(c, "SELECT queue_apply_removal('test', 'apply_args', '2:4:5,1:4:5')", "row ids must increase")
    expect_error(c, "SELECT queue_apply_removal('test', 'apply_args')", "takes 3 arguments")
    expect_error(c, "SELECT queue_apply_removal('test', 'nope', '1:4:5')", "nope")
    expect_error(c, "SELECT queue_apply_removal('test', 'apply_args', '1:4:5')", "row 1: no such row here")
    query(c, "INSERT INTO apply_args VALUES (7)")
    expect_error(c, "SELECT queue_apply_removal('test', 'apply_args', '1:4:5')", "row 1: other bytes here")
    assert value(c, "SELECT COUNT(*) FROM apply_args") == 1
    for bad in ("", "1,", "2,1", "x", "1;2"):
        expect_error(c, f"SELECT queue_apply_dedup('test', 'apply_args', '{bad}')",
                     "queue_apply_dedup(): argument 3", "expected increasing row positions")
    expect_error(c, "SELECT queue_apply_dedup('test', 'apply_args')", "takes 3 arguments")
    # Outside the transaction that inserted rows: there is no such new row.
    expect_error(c, "SELECT queue_apply_dedup('test', 'apply_args', '0')", "apply_args", "no new row at position 0")
    for bad in ("", "7", "7:", ":5", "7:5:1", "x:5", "4294967296:5", "7:-1"):
        expect_error(c, f"SELECT queue_apply_srcid('test', 'apply_args', '{bad}')",
                     "queue_apply_srcid(): argument 3", "expected '<source id>:<last row id>'")
    expect_error(c, "SELECT queue_apply_srcid('test', 'nope', '7:5')", "nope")
    for bad in ("1:4:5,", "1:4", "0:4:5", ""):
        expect_error(c, f"SELECT queue_apply_redrive('test', 'apply_args', '{bad}')",
                     "queue_apply_redrive(): argument 3", "expected a list")
    expect_error(c, "SELECT queue_apply_redrive('test', 'apply_args')", "takes 3 arguments")
    expect_error(c, "SELECT queue_apply_redrive('test', 'apply_args', '1:4:5')", "row 1: other bytes here")
    assert value(c, "SELECT COUNT(*) FROM apply_args") == 1


def test_a_read_only_replica_applies_rows_and_refuses_consumers(pair):
    """The applier is exempt from read_only; a consumer on the replica is refused
    (tests/integration/test_read_only.py has the single-server cases)."""
    pair.primary.sql("CREATE TABLE test.ro_jobs (id INT NOT NULL) ENGINE=QUEUE")
    pair.primary.sql("CREATE USER repl_worker@localhost IDENTIFIED BY 'pw'")  # replicates
    pair.primary.sql("GRANT SELECT, DELETE ON test.* TO repl_worker@localhost")
    pair.replica.sql("SET GLOBAL read_only = 1")
    try:
        pair.primary.sql("INSERT INTO test.ro_jobs VALUES (1), (2)")
        pair.sync()
        assert rows(pair.replica, "ro_jobs") == [1, 2]
        c = pymysql.connect(unix_socket=str(pair.replica.socket), user="repl_worker", password="pw",
                            database="test", connect_timeout=10, read_timeout=60, autocommit=True)
        try:
            with pytest.raises(pymysql.err.OperationalError) as e:
                query(c, "SELECT queue_wait('ro_jobs', 0)")
            assert e.value.args[0] == 1290 and "test.ro_jobs" in e.value.args[1], e.value.args
        finally:
            c.close()
        assert rows(pair.replica, "ro_jobs") == [1, 2]
    finally:
        pair.replica.sql("SET GLOBAL read_only = 0")
        pair.primary.sql("DROP USER repl_worker@localhost")


@pytest.mark.parametrize("binlog_format", ["ROW", "MIXED"])
def test_a_row_is_visible_only_after_its_insert_reached_the_binary_log(pair, binlog_format):
    """Row 1 of `INSERT (1), (2)` is written while the statement still runs (a trigger holds it
    at row 2). With the binary log on the rows wait for the statement's commit, after its binlog
    write: a DELETE meanwhile finds nothing, so no DELETE of a row can reach the binlog before
    its INSERT. (Before, row 1 was visible at once and the DELETE was logged first: a ROW-format
    replica stopped with error 1032, a MIXED one kept the row.)"""
    table = f"raced_{binlog_format.lower()}"
    admin = pair.primary.connect()
    query(admin, f"CREATE TABLE {table} (id INT NOT NULL) ENGINE=QUEUE")
    query(admin, f"CREATE TRIGGER {table}_hold BEFORE INSERT ON {table} FOR EACH ROW "
                 "BEGIN IF NEW.id = 2 THEN DO GET_LOCK('hold', 120); DO RELEASE_LOCK('hold'); END IF; END")
    assert value(admin, "SELECT GET_LOCK('hold', 0)") == 1
    producer = pair.primary.connect()
    deleter = pair.primary.connect()
    for c in (producer, deleter):
        query(c, "SET SESSION binlog_format = %s", (binlog_format,))
    insert = Background(query, producer, f"INSERT INTO {table} VALUES (1), (2)")
    wait_until(lambda: value(admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                    f"WHERE ID = {producer.thread_id()} AND STATE = 'User lock'") == 1,
               what="the INSERT to wait at row 2")
    assert value(deleter, f"SELECT COUNT(*) FROM {table}") == 0
    query(deleter, f"DELETE FROM {table} WHERE id = 1")
    assert value(deleter, "SELECT ROW_COUNT()") == 0
    assert value(admin, "SELECT RELEASE_LOCK('hold')") == 1
    insert.join()
    assert rows(pair.primary, table) == [1, 2]
    pair.sync()
    assert rows(pair.replica, table) == [1, 2]
    assert pair.status()["Slave_SQL_Running"] == "Yes"


def test_a_replica_that_installed_queue_at_run_time_stops_with_the_fix_named(server_factory):
    """Without the binary log, QUEUE installed at run time gets no two-phase commit; the
    replica's applier writes each event in a transaction with its InnoDB GTID position, so it
    stops with an error that says what to do, instead of applying non-atomically."""
    p = Pair(server_factory, replica_at_startup=False, replica_args=["--skip-log-bin"])  # the subject: no binlog
    try:
        p.primary.sql("CREATE TABLE test.rt (id INT NOT NULL) ENGINE=QUEUE")
        p.sync()
        p.primary.sql("INSERT INTO test.rt VALUES (1)")
        st = p.wait_stopped()
        assert st["Last_SQL_Errno"] == 1235, st
        assert "installed while the server ran" in st["Last_SQL_Error"], st
        assert "Restart the server" in st["Last_SQL_Error"], st
        assert rows(p.replica, "rt") == []
    finally:
        p.destroy()


def test_a_binary_log_replayed_with_mariadb_binlog_rebuilds_the_queue(server_factory):
    """`mariadb-binlog | mariadb` into an empty server: the same rows under the same ids, the
    consumed ones removed and the primary's duplicates dropped (the replay sets
    pseudo_slave_mode, so the primary's decisions apply, not the replaying server's window)."""
    primary = server_factory.new(extra_args=["--log-bin=replay-bin", "--server-id=1", "--binlog-format=ROW"])
    target = server_factory.new(at_startup=True)
    try:
        c = primary.connect()
        query(c, "CREATE TABLE replayed (id INT NOT NULL, k VARCHAR(8)) ENGINE=QUEUE DEDUP_COLUMN='k' DEDUP_WINDOW=1")
        query(c, "INSERT INTO replayed VALUES (1, 'a'), (2, 'a'), (3, 'b')")  # 2 dropped
        time.sleep(1.5)
        query(c, "INSERT INTO replayed VALUES (4, 'a'), (5, 'c'), (6, 'd')")  # 4 kept: a window later
        assert query(c, "SELECT id FROM replayed WHERE queue_wait('replayed', 0)") == [(1,)]
        assert value(c, "SELECT queue_end()") == 1
        query(c, "BEGIN")
        assert query(c, "SELECT id FROM replayed WHERE queue_wait('replayed', 0)") == [(3,)]
        query(c, "INSERT INTO replayed VALUES (7, 'c')")  # dropped at the commit
        assert value(c, "SELECT queue_end()") == 1
        query(c, "COMMIT")
        files = sorted(str(f) for f in primary.datadir.glob("replay-bin.0*"))
        dump = subprocess.run(["mariadb-binlog", *files], capture_output=True, check=True).stdout
        p = subprocess.run(["mariadb", f"--socket={target.socket}", "-uroot", "test"], input=dump, capture_output=True)
        assert p.returncode == 0, p.stderr.decode()
        assert [r[1] for r in rows_with_ids(primary, "replayed")] == [4, 5, 6]
        assert rows_with_ids(target, "replayed") == rows_with_ids(primary, "replayed")
    finally:
        primary.destroy()
        target.destroy()


def test_a_chained_replica_gets_what_its_replica_primary_applied(server_factory):
    """primary -> middle (log-bin, log_slave_updates) -> last: the middle logs again what it
    applies (removals, the duplicates and replays the primary dropped, relay sources), so the
    last replica holds the primary's queue too, ids included, and its relay record."""
    chain = Chain(server_factory)
    pair, last = chain.pair, chain.last
    try:
        p = pair.primary
        c = p.connect()
        query(c, "CREATE TABLE chained (id INT NOT NULL, k INT) ENGINE=QUEUE DEDUP_COLUMN='k'")
        query(c, "INSERT INTO chained VALUES (1, 1), (2, 1), (3, 2), (4, NULL)")  # 2 dropped
        query(c, "SELECT queue_set_srcid(5, 'a', 10, 11)")
        query(c, "INSERT INTO chained VALUES (5, NULL), (6, NULL)")
        query(c, "SELECT queue_set_srcid(5, 'a', 11, 12)")
        query(c, "INSERT INTO chained VALUES (6, NULL), (7, NULL)")  # 6 is a replay
        assert query(c, "SELECT id FROM chained WHERE queue_wait('chained', 0)") == [(1,)]
        assert query(c, "SELECT id FROM chained WHERE queue_wait('chained', 0)") == [(3,)]  # ends 1
        assert value(c, "SELECT queue_end()") == 1
        query(c, "DELETE FROM chained WHERE id = 5")
        chain.sync()
        assert [r[1] for r in rows_with_ids(p, "chained")] == [4, 6, 7]
        assert rows_with_ids(pair.replica, "chained") == rows_with_ids(p, "chained")
        assert rows_with_ids(last, "chained") == rows_with_ids(p, "chained")
        r = last.connect()  # the last replica, taking over, knows source 5 up to row 12
        query(r, "SELECT queue_set_srcid(5, 'a', 12, 13)")
        query(r, "INSERT INTO chained VALUES (7, NULL), (8, NULL)")
        assert [x[1] for x in rows_with_ids(last, "chained")] == [4, 6, 7, 8]
    finally:
        chain.destroy()
