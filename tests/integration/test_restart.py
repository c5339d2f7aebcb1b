"""Rows, removals and row ids survive a clean restart and a kill -9, in every sync mode."""
import os

import pytest

from sqlcheck import owned_row_id, query, value

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes

MODES = [(mode, kill) for mode in ("fdatasync", "none", "fsync") for kill in (False, True)]
MODE_IDS = [f"{m}-{'kill9' if k else 'clean'}" for m, k in MODES]


def _set_mode(s, mode):
    s.sql(f"SET GLOBAL queue_sync_mode = '{mode}'")


@pytest.mark.parametrize("mode, kill", MODES, ids=MODE_IDS)
def test_rows_survive_restart(fresh_server, mode, kill):
    s = fresh_server
    _set_mode(s, mode)
    s.sql("CREATE TABLE test.q (v INT, s TEXT, b BLOB, t DATETIME(6), n INT NULL) ENGINE=QUEUE")
    blobs = [os.urandom(i * 37 % 5000) for i in range(300)]
    with s.connect().cursor() as cur:
        cur.executemany("INSERT INTO test.q VALUES (%s, %s, %s, '2024-01-02 03:04:05.000006', NULL)",
                        [(i, f"row {i}", blobs[i]) for i in range(300)])
    want = s.sql("SELECT * FROM test.q")
    assert len(want) == 300
    s.restart(kill=kill)
    assert s.sql("SELECT * FROM test.q") == want
    assert s.value("SELECT COUNT(*) FROM test.q") == 300


@pytest.mark.parametrize("mode, kill", MODES, ids=MODE_IDS)
def test_removals_survive_restart(fresh_server, mode, kill):
    s = fresh_server
    _set_mode(s, mode)
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    s.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i})" for i in range(20)))
    c = s.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1   # row 0 ...
    assert value(c, "SELECT queue_end()") == 1          # ... acknowledged
    assert value(c, "SELECT queue_wait('q', 0)") == 1   # row 1 ...
    assert value(c, "SELECT queue_wait('q', 0)") == 1   # ... consumed by the next wait; owns row 2
    query(s.connect(), "DELETE FROM test.q WHERE v >= 15")
    s.restart(kill=kill)
    # row 2 was owned when the server stopped: it is back; 0, 1 and 15..19 are gone
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == list(range(2, 15))


@pytest.mark.parametrize("kill", [False, True], ids=["clean", "kill9"])
def test_rowids_are_stable_across_restart(fresh_server, kill):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    s.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    owners = [s.connect() for _ in range(3)]
    before = []
    for c in owners:
        assert value(c, "SELECT queue_wait('q', 0)") == 1
        before.append(owned_row_id(c))
    s.restart(kill=kill)
    after = []
    owners = [s.connect() for _ in range(3)]
    for c in owners:
        assert value(c, "SELECT queue_wait('q', 0)") == 1
        after.append(owned_row_id(c))
    assert after == before
    s.sql("INSERT INTO test.q VALUES (4)")
    c = s.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_rowid()") > max(i for _, i in before)


@pytest.mark.parametrize("kill", [False, True], ids=["clean", "kill9"])
def test_ddl_survives_restart(fresh_server, kill):
    s = fresh_server
    for t in ("kept", "truncated", "dropped", "renamed"):
        s.sql(f"CREATE TABLE test.{t} (v INT) ENGINE=QUEUE")
        s.sql(f"INSERT INTO test.{t} VALUES (1), (2)")
    s.sql("TRUNCATE TABLE test.truncated")
    s.sql("DROP TABLE test.dropped")
    s.sql("RENAME TABLE test.renamed TO test.renamed2")
    s.sql("CREATE DATABASE other")
    s.sql("CREATE TABLE other.q (v INT) ENGINE=QUEUE")
    s.sql("INSERT INTO other.q VALUES (5)")
    s.restart(kill=kill)
    assert s.value("SELECT COUNT(*) FROM test.kept") == 2
    assert s.value("SELECT COUNT(*) FROM test.truncated") == 0
    assert s.sql("SHOW TABLES FROM test LIKE 'dropped'") == []
    assert s.sql("SELECT v FROM test.renamed2") == [(1,), (2,)]
    assert s.sql("SELECT v FROM other.q") == [(5,)]
    s.sql("CREATE TABLE test.dropped (v INT) ENGINE=QUEUE")
    assert s.value("SELECT COUNT(*) FROM test.dropped") == 0


def test_kill9_while_consumers_wait(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    waiters = [s.connect() for _ in range(3)]
    for c in waiters:
        c._execute_command(3, "SELECT queue_wait('q', 60)")  # COM_QUERY, answer never read
    s.restart(kill=True)
    s.sql("INSERT INTO test.q VALUES (1)")
    assert s.value("SELECT queue_wait('q', 0)") == 1


def test_many_restarts_keep_appending(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    for i in range(5):
        s.sql(f"INSERT INTO test.q VALUES ({i})")
        s.restart(kill=bool(i % 2))
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == list(range(5))
