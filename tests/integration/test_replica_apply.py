"""A replica applying QUEUE tables (docs/replication.md): killed with kill -9 while it applies,
restarted, it applies every event once (its GTID position commits with the engine's changes,
two-phase with InnoDB's mysql.gtid_slave_pos, coordinated by the replica's own binary log);
with parallel replication too. Producers insert and delete, consumers consume (autocommit and in
transactions) on the primary meanwhile. The rows are compared as the queue holds them: none
twice, none lost, in the primary's order, under the primary's ids."""
import itertools
import random
import shutil
import threading

import pymysql
import pytest

from q4m_server import SERVER_PLUGIN_DIR
from replication_pair import Pair
from sqlcheck import consume_job, query, wait_until

PRODUCERS = 4
ROWS_PER_PRODUCER = 600
# The replica logs what it applies (log_slave_updates), as a replica that may be promoted must:
# its binary log then coordinates its commits.
REPLICA_BINLOG = ["--log-bin=replica-bin", "--log-slave-updates"]


def _produce(primary, producer, removed, errors):
    """Inserts (producer, seq) rows, one to five per statement, and deletes every tenth row
    again a little later (so DELETEs of rows replicate as well)."""
    try:
        c = primary.connect()
        rng = random.Random(producer)
        seq = 0
        while seq < ROWS_PER_PRODUCER:
            n = min(rng.randint(1, 5), ROWS_PER_PRODUCER - seq)
            values = ", ".join(f"({producer}, {seq + i})" for i in range(n))
            query(c, f"INSERT INTO test.jobs (producer, seq) VALUES {values}")
            seq += n
            gone = seq - 7
            if gone >= 0 and gone % 10 == 0:
                query(c, "DELETE FROM test.jobs WHERE producer = %s AND seq = %s", (producer, gone))
                removed.add((producer, gone))
    except pymysql.MySQLError as e:  # the primary is never killed here: any error fails the test
        errors.append(e)


def _consume(primary, in_transaction, consumed, stop, errors):
    """Consumes rows until told to stop, each ended explicitly (in its own transaction if
    in_transaction); notes every row whose end returned."""
    try:
        c = primary.connect()
        while not stop.is_set():
            consumed.update(consume_job(c, in_transaction))
    except pymysql.MySQLError as e:
        errors.append(e)


def _rows(server):
    return [(p, q) for p, q in server.sql("SELECT producer, seq FROM test.jobs")]


def _check_same_queue(pair, removed):
    pair.sync()
    primary, replica = _rows(pair.primary), _rows(pair.replica)
    assert len(replica) == len(set(replica)), "a row applied twice on the replica"
    assert pair.primary.sql("SELECT queue_scan_rowid() FROM test.jobs") == \
        pair.replica.sql("SELECT queue_scan_rowid() FROM test.jobs"), "the replica's row ids differ"
    expected = {(p, q) for p in range(PRODUCERS) for q in range(ROWS_PER_PRODUCER)} - removed
    assert set(primary) == expected
    assert set(replica) == expected, (sorted(expected - set(replica))[:10], sorted(set(replica) - expected)[:10])
    for p in range(PRODUCERS):  # each producer's rows in its order
        mine = [q for pp, q in primary if pp == p]
        assert mine == sorted(mine), f"producer {p}'s rows out of order"
    # The whole queue in the primary's order: QUEUE places rows in the binary log's commit order
    # (commit_ordered), and the replica applies that log in order (parallel ones too).
    if replica != primary:
        first = next(i for i, (a, b) in enumerate(zip(replica, primary)) if a != b)
        raise AssertionError(f"the replica's queue order differs from row {first}: "
                             f"{replica[first:first + 5]} against {primary[first:first + 5]}")
    st = pair.status()
    assert st["Slave_SQL_Running"] == "Yes" and st["Last_SQL_Errno"] == 0, st


@pytest.mark.parametrize("replica_args", [
    REPLICA_BINLOG,
    REPLICA_BINLOG + ["--slave-parallel-threads=4", "--slave-parallel-mode=optimistic"],
], ids=["serial", "parallel-optimistic"])
def test_a_replica_killed_while_applying_applies_every_event_once(server_factory, replica_args):
    pair = Pair(server_factory, replica_args=replica_args)
    try:
        pair.primary.sql("CREATE TABLE test.jobs (producer INT NOT NULL, seq INT NOT NULL) ENGINE=QUEUE")
        pair.sync()
        removed, consumed, errors, stop = set(), set(), [], threading.Event()
        producers = [threading.Thread(target=_produce, args=(pair.primary, p, removed, errors))
                     for p in range(PRODUCERS)]
        consumers = [threading.Thread(target=_consume, args=(pair.primary, t, consumed, stop, errors))
                     for t in (False, True)]
        for t in producers + consumers:
            t.start()
        rng = random.Random(29)
        for _ in itertools.repeat(None, 3):
            threading.Event().wait(rng.uniform(0.3, 0.8))
            pair.replica.kill9()
            pair.replica.start()  # the replica's threads start again from its GTID position
        for t in producers:
            t.join(300)
        stop.set()
        for t in consumers:
            t.join(300)
        assert not errors, errors
        assert len(consumed) > 100, len(consumed)
        _check_same_queue(pair, removed | consumed)
    finally:
        pair.destroy()


def _produce_until_killed(primary, producer, acked):
    """Inserts rows until the server goes away; notes those whose INSERT returned."""
    try:
        c = primary.connect()
        seq = 0
        while True:
            query(c, "INSERT INTO test.jobs (producer, seq) VALUES (%s, %s)", (producer, seq))
            acked.add((producer, seq))
            seq += 1
    except (pymysql.MySQLError, OSError, AttributeError):  # the primary died
        pass


def _kill_primary_under(pair, workers, rng):
    """Starts `workers` (threads writing to the primary), kills the primary with kill -9 a
    moment later, waits for them to notice and starts it again."""
    for t in workers:
        t.start()
    threading.Event().wait(rng.uniform(0.4, 0.9))
    pair.primary.kill9()
    for t in workers:
        t.join(60)
    pair.primary.start()


def _encrypted_binlog_args(server_factory, tmp_path):
    """An encrypted binary log (encrypt_binlog) with a key from file_key_management, the
    server's own key plugin (copied next to ours: the servers load plugins from there)."""
    shutil.copy(SERVER_PLUGIN_DIR / "file_key_management.so", server_factory.plugin_dir)
    keys = tmp_path / "binlog-keys.txt"
    keys.write_text("1;" + "a7" * 32 + "\n")
    return ["--plugin-load-add=file_key_management", f"--file-key-management-filename={keys}",
            "--encrypt-binlog=ON"]


@pytest.mark.parametrize("encrypted", [False, True], ids=["binlog", "encrypted-binlog"])
def test_a_primary_killed_and_restarted_keeps_the_replicas_ids(server_factory, tmp_path, encrypted):
    """Transactions prepared when the primary dies are committed by its restart's recovery in
    the binary log's order (read back with the server's reader, which decrypts an encrypted
    log), so the ids it gives their rows are those the replica gave them: the replica applies
    the consumption of every row after the restart (it stops if an id names other bytes there)."""
    pair = Pair(server_factory, replica_args=REPLICA_BINLOG,
                primary_args=_encrypted_binlog_args(server_factory, tmp_path) if encrypted else ())
    try:
        assert pair.primary.value("SELECT @@encrypt_binlog") == encrypted
        pair.primary.sql("CREATE TABLE test.jobs (producer INT NOT NULL, seq INT NOT NULL) ENGINE=QUEUE")
        acked = set()
        rng = random.Random(31)
        for cycle in range(4):
            _kill_primary_under(pair, [threading.Thread(target=_produce_until_killed,
                                                        args=(pair.primary, cycle * 10 + p, acked)) for p in range(6)],
                                rng)
        pair.sync()
        ids = "SELECT queue_scan_rowid(), producer, seq FROM test.jobs"
        assert pair.replica.sql(ids) == pair.primary.sql(ids), "the replica's rows or ids differ from the primary's"
        held = {(p, s) for _, p, s in pair.primary.sql(ids)}
        assert acked <= held, sorted(acked - held)[:10]
        c = pair.primary.connect()
        while query(c, "SELECT 1 FROM test.jobs WHERE queue_wait('test.jobs', 0)"):
            pass
        query(c, "SELECT queue_end()")
        pair.sync()
        assert pair.replica.sql(ids) == [] and pair.status()["Last_SQL_Errno"] == 0, pair.status()
    finally:
        pair.destroy()


def _relay_until_killed(primary, source, start, end, acked):
    """Relays rows (source, seq) of relay source `source` from `start`, two per statement
    (queue_set_srcid), until `end` or until the server goes away; notes the seqs whose INSERT
    returned. Rows seq % 10 == 0 and 1 share a DEDUP_COLUMN key: the second is a duplicate."""
    try:
        c = primary.connect()
        seq = start
        while end is None or seq < end:
            rows = [(source, s, source * 100000 + s // 2 if s % 10 in (0, 1) else None) for s in (seq, seq + 1)]
            query(c, f"SELECT queue_set_srcid({source}, 'a', {seq + 1}, {seq + 2})")  # source ids from 1
            query(c, "INSERT INTO test.relayed (source, seq, k) VALUES (%s, %s, %s), (%s, %s, %s)",
                  rows[0] + rows[1])
            acked.update((source, s) for s in (seq, seq + 1))
            seq += 2
    except (pymysql.MySQLError, OSError, AttributeError):  # the primary died
        pass


def test_a_primary_killed_while_relaying_keeps_the_replicas_rows_and_relay_records(server_factory):
    """kill -9 of a primary while relays write a DEDUP_COLUMN table (queue_set_srcid), each
    resending its last rows after the restart as q4m-forward does: the replays and duplicates
    the primary dropped are dropped on the replica too, the rows keep the primary's ids there,
    every row is there once, and the replica's relay records are the primary's (a resend to the
    replica after a failover is dropped)."""
    pair = Pair(server_factory, replica_args=REPLICA_BINLOG)
    try:
        pair.primary.sql("CREATE TABLE test.relayed (source INT NOT NULL, seq INT NOT NULL, k INT) "
                         "ENGINE=QUEUE DEDUP_COLUMN='k'")
        acked = set()
        rng = random.Random(37)
        sources = (1, 2, 3)

        def resend_from(source):  # the last 4 acknowledged rows again (even: a pair's start)
            mine = [s for src, s in acked if src == source]
            return max(0, (max(mine) + 1 if mine else 0) - 4)

        for _ in range(3):
            _kill_primary_under(pair, [threading.Thread(target=_relay_until_killed,
                                                        args=(pair.primary, s, resend_from(s), None, acked))
                                       for s in sources], rng)
        ends = {s: resend_from(s) + 40 for s in sources}
        relays = [threading.Thread(target=_relay_until_killed, args=(pair.primary, s, resend_from(s), ends[s], acked))
                  for s in sources]
        for t in relays:
            t.start()
        for t in relays:
            t.join(120)
        pair.sync()
        ids = "SELECT queue_scan_rowid(), source, seq FROM test.relayed"
        on_primary = pair.primary.sql(ids)
        assert pair.replica.sql(ids) == on_primary, "the replica's rows or ids differ from the primary's"
        for s in sources:
            seqs = sorted(q for _, src, q in on_primary if src == s)
            assert seqs == [q for q in range(ends[s]) if q % 10 != 1], f"source {s}: {seqs[:20]}..."
        r = pair.replica.connect()  # a failover: each relay resends its last rows to the replica
        for s in sources:
            query(r, f"SELECT queue_set_srcid({s}, 'a', {ends[s] - 1}, {ends[s]})")
            query(r, "INSERT INTO test.relayed (source, seq, k) VALUES (%s, %s, NULL), (%s, %s, NULL)",
                  (s, ends[s] - 2, s, ends[s] - 1))
        assert pair.replica.sql(ids) == on_primary, "the replica took a resend"
        st = pair.status()
        assert st["Last_SQL_Errno"] == 0, st
    finally:
        pair.destroy()


def _produce_ttl_until_killed(primary, producer):
    try:
        c = primary.connect()
        for seq in itertools.count():
            query(c, "INSERT INTO test.ttl_jobs (producer, seq) VALUES (%s, %s)", (producer, seq))
    except (pymysql.MySQLError, OSError, AttributeError):  # the primary died
        pass


def test_a_primary_killed_while_expiring_rows_keeps_its_replica_a_copy(server_factory):
    """MESSAGE_TTL with the binary log on: each expiry is a two-phase transaction of the
    primary's, logged as the removal of its rows by id. The primary is killed with kill -9 while
    producers insert and rows expire; its restart expires again what was only claimed. The
    replica expires nothing itself and applies every logged expiry: with expiry stopped
    (MESSAGE_TTL=0) it holds the primary's rows, ids included, and after the rest expired on
    the primary it holds none and its applier never stopped."""
    pair = Pair(server_factory, replica_args=REPLICA_BINLOG)
    try:
        pair.primary.sql("CREATE TABLE test.ttl_jobs (producer INT NOT NULL, seq INT NOT NULL) "
                         "ENGINE=QUEUE MESSAGE_TTL=1")
        rng = random.Random(47)
        for cycle in range(3):
            workers = [threading.Thread(target=_produce_ttl_until_killed, args=(pair.primary, cycle * 10 + p))
                       for p in range(4)]
            for t in workers:
                t.start()
            # Past the TTL of the first rows: expiries commit while the primary dies.
            threading.Event().wait(rng.uniform(1.3, 2.0))
            assert pair.primary.queue_stats("test.ttl_jobs")["rows_expired"] > 0
            pair.primary.kill9()
            for t in workers:
                t.join(60)
            pair.primary.start()
        pair.primary.sql("ALTER TABLE test.ttl_jobs MESSAGE_TTL=0")
        pair.sync()
        ids = "SELECT queue_scan_rowid(), producer, seq FROM test.ttl_jobs"
        assert pair.replica.sql(ids) == pair.primary.sql(ids), "the replica's rows or ids differ from the primary's"
        assert pair.replica.queue_stats("test.ttl_jobs")["rows_expired"] == 0  # its rows left as the log said
        pair.primary.sql("ALTER TABLE test.ttl_jobs MESSAGE_TTL=1")
        # Every row removed (COUNT(*) skips the rows claimed for an expiry not committed yet).
        wait_until(lambda: pair.primary.queue_stats("test.ttl_jobs")["rows"] == 0, timeout=30,
                   what="the primary's expiry of every row")
        pair.sync()
        assert pair.replica.sql(ids) == [] and pair.status()["Last_SQL_Errno"] == 0, pair.status()
    finally:
        pair.destroy()
