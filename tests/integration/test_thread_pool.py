"""queue_wait() under MariaDB's thread pool (thread_handling=pool-of-threads).

A blocked queue_wait() must tell the pool (thd_wait_begin), or the pool's only worker
thread sleeps in it while the INSERT that would wake it waits for that very thread.
The stall limit is set far beyond the waits' timeouts, so only the notice can save them:
without it the waits time out (return 0) instead of receiving the rows."""
import os

import pytest

from sqlcheck import Background, query, value, wait_until

WAIT = 20  # seconds; far below the stall limit below


@pytest.fixture
def pooled(server_factory):
    s = server_factory.new(extra_args=["--thread-handling=pool-of-threads", "--thread-pool-size=1",
                                       "--thread-pool-stall-limit=600000"])
    yield s
    s.destroy(keep_dir=bool(os.environ.get("Q4M_KEEP_TMP")))


def _waiters_blocked(s, n):
    def blocked():
        rows = s.sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE %s",
                     ("SELECT queue_wait(%",))
        return rows[0][0] == n
    wait_until(blocked, what=f"{n} connections in queue_wait")


def test_insert_reaches_a_waiter_blocking_the_only_pool_thread(pooled):
    pooled.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    assert pooled.value("SELECT @@thread_handling") == "pool-of-threads"
    c = pooled.connect()
    bg = Background(lambda: value(c, f"SELECT queue_wait('test.q', {WAIT})"))
    _waiters_blocked(pooled, 1)
    pooled.sql("INSERT INTO test.q VALUES (1)")
    assert bg.join() == 1
    assert query(c, "SELECT v FROM test.q") == [(1,)]


def test_many_waiters_and_a_producer_share_one_pool_group(pooled):
    pooled.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    conns = [pooled.connect() for _ in range(6)]
    bgs = [Background(lambda c=c: value(c, f"SELECT queue_wait('test.q', {WAIT})")) for c in conns]
    _waiters_blocked(pooled, len(conns))
    pooled.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i})" for i in range(len(conns))))
    assert [bg.join() for bg in bgs] == [1] * len(conns)
    got = sorted(value(c, "SELECT v FROM test.q") for c in conns)
    assert got == list(range(len(conns)))
    for c in conns:
        assert value(c, "SELECT queue_end()") == 1
    assert pooled.value("SELECT COUNT(*) FROM test.q") == 0
