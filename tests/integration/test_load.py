"""Loading the plugin: engine, functions, information_schema, SHOW ENGINE QUEUE STATUS."""
import json
import subprocess

import pymysql
import pytest

from binlog_modes import binlog_off_only, both_binlog_modes
from sqlcheck import query, wait_until

from q4m_server import REPO


FUNCTIONS = ["queue_wait", "queue_take_dead", "queue_end", "queue_abort", "queue_rowid", "queue_delivery_count",
             "queue_renew_lease", "queue_set_srcid", "queue_compact", "queue_stats", "queue_release_owned",
             "queue_redrive_dead", "queue_purge_dead", "queue_allowed", "queue_scan_rowid", "queue_scan_state", "queue_scan_history", "queue_scan_ended_at",
             "queue_scan_deliveries", "queue_apply_removal", "queue_apply_dedup", "queue_apply_srcid", "queue_apply_redrive", "queue_apply_redo", "queue_expire",
             "queue_backup_stage", "queue_receive", "queue_receipt", "queue_end_receipt", "queue_abort_receipt",
             "queue_renew_receipt", "queue_subscribe", "queue_unsubscribe", "queue_apply_subscribe",
             "queue_apply_unsubscribe", "queue_apply_sub_end"]
QUEUE_TABLES_COLUMNS = ["TABLE_SCHEMA", "TABLE_NAME", "ROWS", "OWNED_ROWS", "WAITERS", "FILE_BYTES",
                        "REMOVED_BYTES", "OLDEST_AGE_MS", "NEXT_ROWID", "DELAYED_ROWS", "DEAD_ROWS",
                        "MESSAGE_GROUPS", "MAX_ROWS", "DEDUP_KEYS",
                        "GROUPS_AT_LIMIT", "ROWS_HELD_BACK", "IN_FLIGHT", "HISTORY_ROWS", "HISTORY_BYTES",
                        "MEMORY_BYTES"]


def test_engine_is_listed(server):
    rows = server.sql("SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE='QUEUE'")
    assert rows == [("YES",)]


def test_functions_are_registered(server):
    names = {r[0].lower() for r in server.sql(
        "SELECT PLUGIN_NAME FROM information_schema.PLUGINS "
        "WHERE PLUGIN_TYPE='FUNCTION' AND PLUGIN_STATUS='ACTIVE'")}
    missing = [f for f in FUNCTIONS if f not in names]
    assert not missing, f"function plugins missing: {missing}"


def test_functions_are_callable(server):
    # Outside owner mode queue_rowid() is NULL: the cheapest proof the function resolves.
    assert server.value("SELECT queue_rowid()") is None


def test_information_schema_queue_tables(server):
    cols = [r[0].upper() for r in server.sql(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA='information_schema' AND TABLE_NAME='QUEUE_TABLES' ORDER BY ORDINAL_POSITION")]
    assert cols == QUEUE_TABLES_COLUMNS
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1),(2),(3)")
    rows = server.sql("SELECT `ROWS`, OWNED_ROWS, WAITERS, NEXT_ROWID, FILE_BYTES "
                      "FROM information_schema.QUEUE_TABLES WHERE TABLE_SCHEMA='test' AND TABLE_NAME='q'")
    assert len(rows) == 1
    nrows, owned, waiters, next_rowid, file_bytes = rows[0]
    assert (nrows, owned, waiters) == (3, 0, 0)
    assert next_rowid >= 4 and file_bytes > 0  # ids are > 0 and increasing


def test_information_schema_counts_owned_rows(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1),(2),(3)")
    c = server.connect()
    assert server.value("SELECT queue_wait('test.q', 0)", conn=c) == 1
    rows = server.sql("SELECT `ROWS`, OWNED_ROWS FROM information_schema.QUEUE_TABLES "
                      "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='q'")
    assert rows == [(3, 1)]


def test_show_engine_queue_status(server):
    def status():
        rows = server.sql("SHOW ENGINE QUEUE STATUS")
        assert rows, "SHOW ENGINE QUEUE STATUS returned nothing"
        assert all(r[0].upper() == "QUEUE" for r in rows), rows
        return "\n".join(str(r[1]) + " " + str(r[2]) for r in rows)

    before = status()
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1),(2),(3)")
    after = status()
    assert before != after, "counters did not change after an INSERT"


def test_queue_stats_is_a_json_object(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1),(2)")
    stats = json.loads(server.value("SELECT queue_stats('test.q')"))
    assert isinstance(stats, dict) and stats


def test_install_twice_is_harmless(server):
    # MariaDB answers a repeated INSTALL SONAME with a warning (or an error); either is fine
    try:
        server.sql("INSTALL SONAME 'ha_queue'")
    except pymysql.MySQLError:
        pass
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1)")
    assert server.value("SELECT queue_wait('test.q', 0)") == 1


@both_binlog_modes
def test_uninstall_and_reinstall_keeps_data(fresh_server):
    """UNINSTALL SONAME unloads the engine once no connection holds state of it: a connection
    that wrote a queue table keeps its state (and so the engine) until it goes, as MariaDB keeps
    any plugin a connection holds data for. (Seen 2026-11-28 with the binary log on, where every
    INSERT was a statement transaction; since the one write path, with it off too.)"""
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    writer = s.connect()
    query(writer, "INSERT INTO test.q VALUES (1),(2),(3)")
    s.sql("FLUSH TABLES")
    s.sql("UNINSTALL SONAME 'ha_queue'")
    listed = "SELECT ENGINE FROM information_schema.ENGINES WHERE ENGINE='QUEUE'"
    assert s.sql(listed) == [("QUEUE",)]  # the writer's connection holds it
    writer.close()
    gone = "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME IN ('QUEUE', 'queue_wait')"
    wait_until(lambda: s.value(gone) == 0, what="the engine unloaded once the writer disconnected")
    assert s.sql(listed) == []
    with pytest.raises(pymysql.MySQLError):
        s.sql("SELECT queue_rowid()")
    s.sql("INSTALL SONAME 'ha_queue'")
    assert s.sql("SELECT v FROM test.q") == [(1,), (2,), (3,)]


def test_plugin_loads_at_startup_after_install(fresh_server):
    fresh_server.restart()
    assert fresh_server.sql(
        "SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE='QUEUE'") == [("YES",)]
    assert fresh_server.value("SELECT queue_rowid()") is None


def test_install_sql_installs_everything(server_factory):
    s = server_factory.new(install=False)
    try:
        assert s.sql("SELECT ENGINE FROM information_schema.ENGINES WHERE ENGINE='QUEUE'") == []
        with open(REPO / "install.sql") as f:
            subprocess.run(["mariadb", "--no-defaults", "-S", str(s.socket), "-uroot"], stdin=f, check=True)
        assert s.sql("SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE='QUEUE'") == [("YES",)]
        names = {r[0].lower() for r in s.sql(
            "SELECT PLUGIN_NAME FROM information_schema.PLUGINS WHERE PLUGIN_TYPE='FUNCTION'")}
        assert set(FUNCTIONS) <= names
        s.restart()
        assert s.sql("SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE='QUEUE'") == [("YES",)]
    finally:
        s.destroy()
