"""Failover (docs/replication.md, "Failover runbook"): a primary and two semi-sync replicas
(AFTER_SYNC) on 127.0.0.1 ports, producers and consumers on the primary, kill -9 of the
primary, promotion of the most advanced replica, clients moved to it. No acknowledged INSERT
is lost, no acknowledged consumption comes back, rows in flight on the dead primary are
handed out again (at least once), every surviving server holds the same queue (rows and ids),
and the old primary rejoins as a replica and holds it too."""
import random
import threading

import pymysql

from semisync_cluster import Cluster, wait_applied
from sqlcheck import consume_job, insert_job, query

PRODUCERS = 3
LOAD_SECONDS = 2.5


def _produce(server, producer, acked, stop):
    """Inserts (producer, seq) rows until the server dies; notes the ones whose INSERT returned.
    Every fifth row goes in a transaction with an InnoDB row (the outbox)."""
    try:
        c = server.connect()
        seq = 0
        while not stop.is_set():
            insert_job(c, producer, seq, with_order=seq % 5 == 0)
            acked.add((producer, seq))
            seq += 1
    except (pymysql.MySQLError, OSError, AttributeError):
        pass  # the primary died (pymysql may also fail on the closed socket)


def _consume(server, in_transaction, taken, acked, stop):
    """Consumes until the server dies; notes the rows handed out (taken) and those whose end
    returned (acked; the end's COMMIT in a transaction, with an InnoDB row of the result). A
    row taken and not acked may be gone (its end committed, the answer was lost) or back."""
    try:
        c = server.connect()
        while not stop.is_set():
            acked.update(consume_job(c, in_transaction, taken, with_result=in_transaction))
    except (pymysql.MySQLError, OSError, AttributeError):  # the primary died
        pass


def _queue(server):
    return server.sql("SELECT queue_scan_rowid(), producer, seq FROM test.jobs")


def test_failover_to_the_most_advanced_replica_keeps_every_acknowledged_change(server_factory):
    cluster = Cluster(server_factory)
    try:
        primary, replicas = cluster.servers[0], cluster.servers[1:]
        primary.sql("CREATE TABLE test.jobs (producer INT NOT NULL, seq INT NOT NULL) ENGINE=QUEUE")
        primary.sql("CREATE TABLE test.orders (producer INT, seq INT, PRIMARY KEY (producer, seq)) ENGINE=InnoDB")
        primary.sql("CREATE TABLE test.results (producer INT, seq INT, PRIMARY KEY (producer, seq)) ENGINE=InnoDB")
        inserted, taken, consumed, stop = set(), set(), set(), threading.Event()
        workers = [threading.Thread(target=_produce, args=(primary, p, inserted, stop)) for p in range(PRODUCERS)]
        workers += [threading.Thread(target=_consume, args=(primary, t, taken, consumed, stop)) for t in (False, True)]
        for w in workers:
            w.start()
        threading.Event().wait(LOAD_SECONDS + random.uniform(0, 1))
        primary.kill9()
        stop.set()
        for w in workers:
            w.join(120)
        assert len(inserted) > 200 and len(consumed) > 50, (len(inserted), len(consumed))

        new_primary = cluster.promote_most_advanced(replicas)
        queue = _queue(new_primary)
        held = {(p, s) for _, p, s in queue}
        lost = inserted - taken - held
        assert not lost, f"acknowledged INSERTs lost: {sorted(lost)[:10]}"
        back = consumed & held
        assert not back, f"acknowledged consumptions came back: {sorted(back)[:10]}"
        # The outbox and exactly-once rows went over with their queue changes.
        orders = {tuple(r) for r in new_primary.sql("SELECT producer, seq FROM test.orders")}
        assert {(p, s) for p, s in inserted if s % 5 == 0} <= orders
        results = {tuple(r) for r in new_primary.sql("SELECT producer, seq FROM test.results")}
        assert not results & held, "a consumption's InnoDB row is there, its removal is not"

        # Clients move to the new primary: it takes inserts and hands out every row it holds,
        # the rows owned on the dead primary included.
        c = new_primary.connect()
        query(c, "INSERT INTO test.jobs VALUES (99, 0)")
        drained = []
        while True:
            got = query(c, "SELECT producer, seq FROM test.jobs WHERE queue_wait('test.jobs', 0)")
            if not got:
                break
            drained += got
        query(c, "SELECT queue_end()")
        assert sorted(drained) == sorted(held | {(99, 0)})

        other = next(r for r in replicas if r is not new_primary)
        gtid = new_primary.value("SELECT @@gtid_binlog_pos")
        wait_applied(other, gtid)
        assert _queue(other) == _queue(new_primary) == []

        # The old primary restarts, drops what no replica acknowledged, and follows.
        cluster.rejoin(primary, new_primary)
        query(c, "INSERT INTO test.jobs VALUES (99, 1), (99, 2)")
        gtid = new_primary.value("SELECT @@gtid_binlog_pos")
        for s in (primary, other):
            wait_applied(s, gtid)
            assert _queue(s) == _queue(new_primary)
            assert len(_queue(s)) == 2
    finally:
        cluster.destroy()
