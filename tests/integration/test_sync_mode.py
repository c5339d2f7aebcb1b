"""Server variables: queue_sync_mode, queue_commit_spin_us and the compaction/mmap settings."""
import threading

import pytest

from sqlcheck import sql_error

DEFAULTS = {
    "queue_sync_mode": "fdatasync",
    "queue_use_concurrent_compaction": "ON",
    "queue_concurrent_compaction_interval": "1048576",
    "queue_mmap_max": str(1 << 30),
    "queue_compact_removed_percent": "50",
    "queue_compact_min_bytes": str(16 << 20),
    "queue_commit_spin_us": "300",
    "queue_sync_removals": "ON",
}


def test_defaults(server):
    got = dict(server.sql("SHOW GLOBAL VARIABLES LIKE 'queue\\_%'"))
    for name, want in DEFAULTS.items():
        assert got.get(name) == want, f"{name}: {got.get(name)!r} != {want!r}"


@pytest.mark.parametrize("mode", ["none", "fsync", "fdatasync", "NONE"])
def test_sync_mode_values(server, mode):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql(f"SET GLOBAL queue_sync_mode = '{mode}'")
    assert server.value("SELECT @@global.queue_sync_mode") == mode.lower()
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    assert server.value("SELECT queue_wait('q', 0)") == 1
    assert server.value("SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q") == 1


@pytest.mark.parametrize("bad", ["'bogus'", "''", "NULL", "17", "-1"])
def test_bad_sync_mode_is_rejected(server, bad):
    sql_error(server.admin(), f"SET GLOBAL queue_sync_mode = {bad}")
    assert server.value("SELECT @@global.queue_sync_mode") == "fdatasync"


def test_sync_mode_at_startup(fresh_server):
    fresh_server.restart(extra_args=["--queue-sync-mode=none"])
    assert fresh_server.value("SELECT @@global.queue_sync_mode") == "none"


@pytest.mark.parametrize("name, val, shown", [
    ("queue_use_concurrent_compaction", "OFF", 0),
    ("queue_concurrent_compaction_interval", 65536, 65536),
    ("queue_compact_removed_percent", 20, 20),
    ("queue_compact_min_bytes", 1 << 20, 1 << 20),
    ("queue_commit_spin_us", 0, 0),
    ("queue_commit_spin_us", 100000, 100000),
])
def test_other_variables_are_settable(server, name, val, shown):
    server.sql(f"SET GLOBAL {name} = %s", (val,))
    assert server.value(f"SELECT @@global.{name}") == shown


@pytest.mark.parametrize("val, shown", [(-1, 0), (100001, 100000), (10 ** 12, 100000)])
def test_commit_spin_out_of_range_is_clamped_with_a_warning(server, val, shown):
    c = server.connect()
    server.sql("SET GLOBAL queue_commit_spin_us = %s", (val,), conn=c)
    warnings = server.sql("SHOW WARNINGS", conn=c)
    assert any(w[1] == 1292 and "queue_commit_spin_us" in w[2] for w in warnings), warnings
    assert server.value("SELECT @@global.queue_commit_spin_us") == shown


def test_commit_spin_is_global_only(server):
    code, msg = sql_error(server.connect(), "SET SESSION queue_commit_spin_us = 5")
    assert code == 1229 and "queue_commit_spin_us" in msg, msg


def _spin_counters(server):
    status = dict((r[1], int(r[2])) for r in server.sql("SHOW ENGINE QUEUE STATUS"))
    return status["commit_spin_hits"] + status["commit_spin_timeouts"]


def _concurrent_durable_inserts(server, threads=8, per_thread=40):
    conns = [server.connect() for _ in range(threads)]
    errors = []

    def run(i):
        try:
            for k in range(per_thread):
                server.sql("INSERT INTO test.q VALUES (%s)", (i * 1000 + k,), conn=conns[i])
        except Exception as e:  # reported below: a thread's exception would otherwise vanish
            errors.append(e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert server.value("SELECT COUNT(*) FROM test.q") == threads * per_thread


@pytest.mark.parametrize("spin_us, spins", [(0, False), (100000, True)])
def test_commit_spin_setting_decides_whether_followers_spin(server, spin_us, spins):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("SET GLOBAL queue_sync_mode = 'fdatasync'")
    server.sql(f"SET GLOBAL queue_commit_spin_us = {spin_us}")
    before = _spin_counters(server)
    _concurrent_durable_inserts(server)
    if spins:
        assert _spin_counters(server) > before  # 8 writers: some queued behind a leader
    else:
        assert _spin_counters(server) == before
