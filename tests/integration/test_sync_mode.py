"""Server variables: queue_sync_mode and the compaction/mmap settings."""
import pytest

from sqlcheck import sql_error

DEFAULTS = {
    "queue_sync_mode": "fdatasync",
    "queue_use_concurrent_compaction": "ON",
    "queue_concurrent_compaction_interval": "1048576",
    "queue_mmap_max": str(1 << 30),
    "queue_compact_removed_percent": "50",
    "queue_compact_min_bytes": str(16 << 20),
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
])
def test_other_variables_are_settable(server, name, val, shown):
    server.sql(f"SET GLOBAL {name} = %s", (val,))
    assert server.value(f"SELECT @@global.{name}") == shown
