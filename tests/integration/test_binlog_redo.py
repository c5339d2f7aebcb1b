"""queue_binlog_redo (docs/recovery.md, "With the binary log on"): a prepare the binary log
coordinates is written without a sync of its own and its records go into the binary log
(queue_apply_redo); after a power cut recovery appends the parts a table's file lacks and
commits them in the binary log's order, under the ids they had.

kill -9 loses nothing of the page cache, so these tests take from the table's file, after the
kill, the chunks written after a point (what a power cut does to unsynced chunks); the power-cut
test (test_power_cut.py, the binlog-on-redo chain) cuts power for real."""
import os
import struct
import subprocess

import pytest

from sqlcheck import expect_error, query, sql_error, value

ARGS = ["--log-bin=mysql-bin", "--binlog-format=ROW", "--server-id=1", "--sync-binlog=1", "--queue-debug-hooks=ON"]


def _data_end(path):
    """The end of the last whole chunk of a QUEUE data file (its preallocated zeros excluded)."""
    b = path.read_bytes()
    pos = 16
    while pos + 16 <= len(b) and b[pos:pos + 4] == b"Q4MC":
        pos += 16 + (struct.unpack_from("<I", b, pos + 4)[0] & 0x7FFFFFFF)
    return pos


def _server(server_factory, redo):
    s = server_factory.new(extra_args=ARGS + [f"--queue-binlog-redo={'ON' if redo else 'OFF'}"], at_startup=True)
    s.sql("CREATE TABLE test.q (id INT) ENGINE=QUEUE")
    s.sql("CREATE TABLE test.orders (id INT PRIMARY KEY) ENGINE=InnoDB")
    return s


def _redo_statements(s):
    n = 0
    for (log, *_rest) in s.sql("SHOW BINARY LOGS"):
        n += sum(1 for ev in s.sql(f"SHOW BINLOG EVENTS IN '{log}'") if "queue_apply_redo(" in str(ev[-1]))
    return n


def _load_after_the_point(s):
    """Rows and consumptions whose prepares and commit records come after the point: an
    autocommit INSERT, an outbox transaction, and two exactly-once consumes (the second one of
    a row inserted after the point: its commit record is lost too)."""
    c = s.connect()
    query(c, "INSERT INTO test.q VALUES (2), (3)")
    query(c, "BEGIN")
    query(c, "INSERT INTO test.orders VALUES (10)")
    query(c, "INSERT INTO test.q VALUES (4)")
    query(c, "COMMIT")
    for order in (11, 12):
        query(c, "BEGIN")
        assert value(c, "SELECT queue_wait('test.q', 1)") == 1
        query(c, f"INSERT INTO test.orders VALUES ({order})")
        query(c, "SELECT queue_end()")
        query(c, "COMMIT")


def _cut_after_the_point(s, monkeypatch, skip_redo):
    path = s.datadir / "test" / "q.Q4M"
    s.sql("INSERT INTO test.q VALUES (1)")
    point = _data_end(path)
    _load_after_the_point(s)
    before = sorted(s.sql("SELECT queue_scan_rowid(), id FROM test.q"))
    assert _data_end(path) > point
    s.kill9()
    with open(path, "r+b") as f:  # what a power cut leaves of chunks nobody synced
        f.truncate(point)
    if skip_redo:
        monkeypatch.setenv("Q4M_DEBUG_SKIP_REDO", "1")
    s.start()
    monkeypatch.delenv("Q4M_DEBUG_SKIP_REDO", raising=False)
    return before


def test_the_prepare_writes_its_redo_into_the_binary_log(server_factory):
    s = _server(server_factory, redo=True)
    try:
        s.sql("INSERT INTO test.q VALUES (1)")
        assert _redo_statements(s) == 1
        # XA keeps its synced prepare: XA PREPARE writes the binary log before the commit.
        c = s.connect()
        for sql in ("XA START 'x1'", "INSERT INTO test.q VALUES (2)", "XA END 'x1'", "XA PREPARE 'x1'", "XA COMMIT 'x1'"):
            query(c, sql)
        assert _redo_statements(s) == 1
        # Another server (a replica) only checks the statement: here, the one the log holds.
        stmt = next(str(ev[-1]) for ev in s.sql("SHOW BINLOG EVENTS IN 'mysql-bin.000001'")
                    if "queue_apply_redo(" in str(ev[-1]))
        assert value(c, "SELECT " + stmt[stmt.index("queue_apply_redo("):]) == 0
        expect_error(c, "SELECT queue_apply_redo('test', 'q', '1:bm90IGEgcmVkbw==')", "not a QUEUE redo record", code=1210)
        assert sorted(s.sql("SELECT id FROM test.q")) == [(1,), (2,)]
    finally:
        s.destroy()


def test_without_queue_binlog_redo_the_binary_log_holds_no_redo(server_factory):
    s = _server(server_factory, redo=False)
    try:
        s.sql("INSERT INTO test.q VALUES (1)")
        assert _redo_statements(s) == 0
        # Nor does a crash start read the binary log for a redo: no marker says a prepare went
        # unsynced (before, every crash start read it, and a binary log event the kill cut
        # mid-write put the server's read errors into the error log: test_ddl_crash.py)
        assert not (s.datadir / "q4m_binlog_redo").exists()
        s.kill9()
        s.start()
        assert value(s.connect(), "SELECT COUNT(*) FROM test.q") == 1
        assert "redo" not in s.err_log_since_start()
    finally:
        s.destroy()


def test_the_redo_marker_is_made_before_an_unsynced_prepare_and_dropped_when_off(server_factory):
    s = _server(server_factory, redo=True)
    try:
        assert not (s.datadir / "q4m_binlog_redo").exists()
        s.sql("INSERT INTO test.q VALUES (1)")
        assert (s.datadir / "q4m_binlog_redo").exists()
        s.kill9()
        s.start()  # still ON: kept for the next crash
        assert (s.datadir / "q4m_binlog_redo").exists()
        s.stop()
        s.start(extra_args=["--queue-binlog-redo=OFF"])  # the last one counts: nothing more goes unsynced
        assert not (s.datadir / "q4m_binlog_redo").exists()
        assert value(s.connect(), "SELECT COUNT(*) FROM test.q") == 1
    finally:
        s.destroy()


def test_on_by_default_where_the_binary_log_syncs_every_commit(server_factory):
    """ON by default; it applies only with sync_binlog=1: otherwise the binary log is no
    durability point, and the prepare keeps its sync (no redo, no marker)."""
    s = server_factory.new(extra_args=["--log-bin=mysql-bin", "--binlog-format=ROW", "--server-id=1"], at_startup=True)
    try:
        if "binlog-redo" not in os.environ.get("Q4M_EXTRA_SERVER_ARGS", ""):
            assert s.value("SELECT @@global.queue_binlog_redo") == 1
        s.sql("SET GLOBAL queue_binlog_redo = ON")
        s.sql("SET GLOBAL sync_binlog = 0")
        s.sql("CREATE TABLE test.q (id INT) ENGINE=QUEUE")
        s.sql("INSERT INTO test.q VALUES (1)")
        assert _redo_statements(s) == 0
        assert not (s.datadir / "q4m_binlog_redo").exists()
        s.sql("SET GLOBAL sync_binlog = 1")
        s.sql("INSERT INTO test.q VALUES (2)")
        assert _redo_statements(s) == 1
        assert (s.datadir / "q4m_binlog_redo").exists()
    finally:
        s.destroy()


def test_parts_the_file_lost_are_redone_from_the_binary_log_under_their_ids(server_factory, monkeypatch):
    s = _server(server_factory, redo=True)
    try:
        before = _cut_after_the_point(s, monkeypatch, skip_redo=False)
        assert before == [(3, 3), (4, 4)], before
        assert sorted(s.sql("SELECT queue_scan_rowid(), id FROM test.q")) == before
        assert sorted(s.sql("SELECT id FROM test.orders")) == [(10,), (11,), (12,)]
        assert "prepared part(s) a power cut lost redone from the binary log" in s.errlog_path.read_text()
        # New rows go on from the ids the redone commits gave.
        s.sql("INSERT INTO test.q VALUES (5)")
        assert s.value("SELECT MAX(queue_scan_rowid()) FROM test.q") == 5
        # Redone once: a second crash finds the parts in the file.
        s.restart(kill=True)
        assert sorted(s.sql("SELECT queue_scan_rowid(), id FROM test.q")) == before + [(5, 5)]
    finally:
        s.destroy()


def test_without_the_redo_the_cut_loses_acknowledged_changes(server_factory, monkeypatch):
    """The proof that the prepares really go unsynced and need the redo: the same cut with the
    redo skipped (a test hook) loses the acknowledged rows and brings consumed rows back."""
    s = _server(server_factory, redo=True)
    try:
        before = _cut_after_the_point(s, monkeypatch, skip_redo=True)
        after = sorted(s.sql("SELECT queue_scan_rowid(), id FROM test.q"))
        assert after != before
        assert after == [(1, 1)], after  # rows 2-4 lost, the consumed row 1 back
    finally:
        s.destroy()


@pytest.mark.parametrize("redo", [True, False], ids=["redo-on", "redo-off-dedup"])
def test_a_commit_that_logs_at_its_prepare_ends_the_sessions_transaction(server_factory, redo):
    """The prepare writes statements into the binary log cache (the redo; with the variable off,
    the duplicates a DEDUP_COLUMN table drops at the commit). Inside COMMIT the server's write
    set the session's "in a transaction" flag again after COMMIT had cleared it: SET
    gtid_seq_no was refused after the COMMIT, so `mariadb-binlog | mariadb` of such a log
    stopped at the next transaction ("Cannot modify @@session.gtid_seq_no inside a
    transaction"), and so did SET sql_log_bin; and the session kept the table's metadata lock
    after COMMIT (the server releases it only outside a transaction), so DDL and mariadb-dump's
    LOCK TABLES timed out (test_transactions' DDL after a consuming transaction, test_backup's
    dump under load)."""
    s = _server(server_factory, redo=redo)
    target = server_factory.new(extra_args=ARGS + [f"--queue-binlog-redo={'ON' if redo else 'OFF'}"], at_startup=True)
    try:
        c, other = s.connect(), s.connect()
        query(other, "SET SESSION lock_wait_timeout = 5")
        query(c, "CREATE TABLE test.d (id INT, k INT) ENGINE=QUEUE DEDUP_COLUMN='k'")
        query(c, "INSERT INTO test.d VALUES (1, 1)")
        for row in ("(2, 2)", "(3, 1)"):  # the second one a duplicate, dropped at the prepare
            query(c, "BEGIN")
            query(c, "INSERT INTO test.orders VALUES (%d)" % (10 + int(row[1])))
            query(c, f"INSERT INTO test.d VALUES {row}")
            query(c, "COMMIT")
            assert value(c, "SELECT @@in_transaction") == 0
            query(c, "SET SESSION sql_log_bin = 1")  # refused inside a transaction
            query(other, "LOCK TABLES test.d WRITE")  # waits for the metadata lock c holds
            query(other, "UNLOCK TABLES")
        assert sorted(s.sql("SELECT id FROM test.d")) == [(1,), (2,)]
        assert (_redo_statements(s) > 0) == redo
        # The replay into a server with the same settings: each transaction's COMMIT ends it.
        files = sorted(str(f) for f in s.datadir.glob("mysql-bin.0*"))
        dump = subprocess.run(["mariadb-binlog", *files], capture_output=True, check=True).stdout
        p = subprocess.run(["mariadb", f"--socket={target.socket}", "-uroot"], input=dump, capture_output=True)
        assert p.returncode == 0, p.stderr.decode()
        assert sorted(target.sql("SELECT queue_scan_rowid(), id FROM test.d")) == \
            sorted(s.sql("SELECT queue_scan_rowid(), id FROM test.d"))
        assert sorted(target.sql("SELECT id FROM test.orders")) == [(12,), (13,)]
    finally:
        s.destroy()
        target.destroy()


def test_a_damaged_middle_chunk_after_a_clean_close_refuses_the_open(server_factory):
    """With the prepares unsynced every chunk after the first carries the `unsynced` flag (what
    precedes it may be lost by a power cut), so a chunk damaged among them read as a lost tail:
    the open cut it and everything after it, silently (rows consumed after it back, rows
    inserted after it gone; test_damaged_files.py with the variable on). A clean close syncs
    the file and appends a synced mark after a flagged last chunk: the damage is refused,
    naming the chunk, and the file is left as it is."""
    from test_damaged_files import _body, _chunks, _flip, _table_of_40_rows_1_to_10_consumed
    s = server_factory.new(extra_args=ARGS + ["--queue-binlog-redo=ON"], at_startup=True)
    try:
        path = _table_of_40_rows_1_to_10_consumed(s)
        chunks = _chunks(path)
        assert sum(flagged for _, _, flagged in chunks) > 40  # the prepares were unsynced
        assert chunks[-1] == (chunks[-1][0], 0, False)  # the mark
        at = path.read_bytes().find(_body(26).encode())
        chunk = max(off for off, _, _ in chunks if off < at)
        _flip(path, at + 5)
        damaged = path.read_bytes()
        s.start()
        errno, msg = sql_error(s.connect(), "SELECT COUNT(*) FROM test.q")
        assert errno, "a damaged chunk followed by valid ones must refuse the open"
        want = f"corrupt chunk at offset {chunk}: chunk body checksum mismatch"
        assert want in msg or want in s.err_log_since_start(), (errno, msg)
        assert path.read_bytes() == damaged
    finally:
        s.destroy()
