"""A QUEUE table on a full file system (ENOSPC): a real mariadbd whose test database directory
is a tiny tmpfs. INSERTs fail with a clear error, the server stays up, every row whose INSERT
returned is still there exactly once (also after kill -9), and a compaction that runs out of
space leaves the old file intact and the table usable.

Needs root (mount -t tmpfs); skipped with the reason otherwise.
"""
import hashlib
import os
import shutil
import subprocess

import pymysql
import pytest

from sqlcheck import query, sql_error, value

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes

DB, TABLE = "spacedb", "spaceq"
FS_BYTES = 8 << 20
BALLAST_BYTES = 1 << 20  # deleted later to give the table room again
ROW_BYTES = 48 << 10
ER_RECORD_FILE_FULL = 1114


def _payload(i):
    return (hashlib.sha256(str(i).encode()).hexdigest() * (ROW_BYTES // 64 + 1))[:ROW_BYTES]


def _mount_tmpfs(path):
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path} (needs root / CAP_SYS_ADMIN): {r.stderr.strip()}")


def _umount(path):
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def full_fs(fresh_server):
    """fresh_server with database DB on an 8 MiB tmpfs holding a 1 MiB ballast file."""
    s = fresh_server
    s.sql(f"CREATE DATABASE {DB}")
    dbdir = s.datadir / DB
    saved_opt = (dbdir / "db.opt").read_bytes() if (dbdir / "db.opt").exists() else None
    _mount_tmpfs(dbdir)
    try:
        if saved_opt is not None:
            (dbdir / "db.opt").write_bytes(saved_opt)
        (dbdir / "ballast").write_bytes(b"\0" * BALLAST_BYTES)
        s.sql(f"CREATE TABLE {DB}.{TABLE} (id INT NOT NULL, body MEDIUMBLOB) ENGINE=QUEUE")
        yield s, dbdir
    finally:
        s.kill9()  # mariadbd keeps the data file open; the mount must be released
        _umount(dbdir)


def _fill_until_full(s):
    """Single-row INSERTs until one fails; returns (ids whose INSERT returned, errno, message)."""
    c = s.connect(db=DB)
    ok = []
    for i in range(FS_BYTES // ROW_BYTES + 50):
        try:
            query(c, f"INSERT INTO {TABLE} VALUES (%s, %s)", (i, _payload(i)))
        except Exception as e:  # noqa: B902 - the first failure is what we are after
            return ok, e.args[0], e.args[1] if len(e.args) > 1 else str(e)
        ok.append(i)
    pytest.fail(f"{len(ok)} rows of {ROW_BYTES} bytes fit on a {FS_BYTES}-byte file system")


def _rows(s):
    return s.sql(f"SELECT id, SHA2(body, 256) FROM {DB}.{TABLE}")


def _expected(ids):
    return [(i, hashlib.sha256(_payload(i).encode()).hexdigest()) for i in ids]


def _consume(s, n):
    """Consumes n rows through owner mode; returns their ids in order."""
    c = s.connect(db=DB)
    got = []
    for _ in range(n):
        assert value(c, f"SELECT queue_wait('{TABLE}', 0)") == 1
        got.append(value(c, f"SELECT id FROM {TABLE}"))
    assert value(c, "SELECT queue_end()") == 1
    return got


def _data_files(dbdir):
    return sorted(p.name for p in dbdir.iterdir() if p.name.startswith(TABLE + ".Q4M"))


def test_insert_on_full_fs_fails_clearly_and_loses_nothing(full_fs):
    s, dbdir = full_fs
    ok, errno, msg = _fill_until_full(s)
    assert len(ok) > 100
    assert errno == ER_RECORD_FILE_FULL, (errno, msg)
    assert f"{TABLE}.Q4M" in msg and "No space left on device" in msg, msg
    assert s.value("SELECT 1") == 1  # alive
    assert _rows(s) == _expected(ok)  # nothing lost, nothing duplicated, nothing invented

    # Still full: a further INSERT fails the same way and changes nothing.
    c = s.connect(db=DB)
    errno2, msg2 = sql_error(c, f"INSERT INTO {TABLE} VALUES (-1, %s)", (_payload(-1),))
    assert errno2 == ER_RECORD_FILE_FULL and "No space left" in msg2, (errno2, msg2)
    assert s.value(f"SELECT COUNT(*) FROM {DB}.{TABLE}") == len(ok)

    # Free some space: rows are consumable, in order, and new INSERTs work again.
    (dbdir / "ballast").unlink()
    assert _consume(s, 10) == ok[:10]
    query(c, f"INSERT INTO {TABLE} VALUES (%s, %s)", (10**6, _payload(10**6)))
    want = _expected(ok[10:] + [10**6])
    assert _rows(s) == want

    s.restart(kill=True)
    assert _rows(s) == want
    assert _consume(s, len(want)) == ok[10:] + [10**6]
    assert s.value(f"SELECT COUNT(*) FROM {DB}.{TABLE}") == 0


def test_consume_while_full(full_fs):
    """queue_end() appends a small REMOVE record: on a full file system it either works or
    fails clearly with the row kept; either way nothing is lost or handed out twice."""
    s, dbdir = full_fs
    ok, _, _ = _fill_until_full(s)
    c = s.connect(db=DB)
    consumed = []
    for _ in range(5):
        assert value(c, f"SELECT queue_wait('{TABLE}', 0)") == 1
        rid = value(c, f"SELECT id FROM {TABLE}")
        errno, msg = None, None
        try:
            value(c, "SELECT queue_end()")
            consumed.append(rid)
        except Exception as e:  # noqa: B902
            errno, msg = e.args[0], e.args[1]
            assert errno == ER_RECORD_FILE_FULL and "No space left" in msg, (errno, msg)
            break
    assert s.value("SELECT 1") == 1
    c.close()  # returns an owned row, if the failed end left one
    assert _rows(s) == _expected([i for i in ok if i not in consumed])
    s.restart(kill=True)
    assert _rows(s) == _expected([i for i in ok if i not in consumed])


def test_compaction_without_space_keeps_old_file(full_fs):
    s, dbdir = full_fs
    ok, _, _ = _fill_until_full(s)
    (dbdir / "ballast").unlink()  # 1 MiB free: enough for REMOVE records, not for the copy
    s.sql(f"DELETE FROM {DB}.{TABLE} WHERE id % 3 = 0")
    keep = [i for i in ok if i % 3 != 0]
    assert _rows(s) == _expected(keep)
    path = dbdir / f"{TABLE}.Q4M"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    ino = path.stat().st_ino

    for concurrent in ("OFF", "ON"):
        s.sql(f"SET GLOBAL queue_use_concurrent_compaction = {concurrent}")
        errno, msg = sql_error(s.admin(), f"SELECT queue_compact('{DB}.{TABLE}')")
        assert errno == ER_RECORD_FILE_FULL, (concurrent, errno, msg)
        assert f"{TABLE}.Q4M" in msg and "No space left on device" in msg, msg
        assert s.value("SELECT 1") == 1
        assert _data_files(dbdir) == [f"{TABLE}.Q4M"]  # the partial .tmp is gone
        assert path.stat().st_ino == ino
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # old file untouched
        assert _rows(s) == _expected(keep)

    # The table still works: insert, consume, and the state survives kill -9.
    c = s.connect(db=DB)
    query(c, f"INSERT INTO {TABLE} VALUES (%s, %s)", (10**6, "small"))
    assert _consume(s, 3) == keep[:3]
    want = [(i, h) for i, h in _expected(keep[3:])] + [(10**6, hashlib.sha256(b"small").hexdigest())]
    assert _rows(s) == want
    s.restart(kill=True)
    assert _rows(s) == want

    # With room again, the same compaction succeeds and shrinks the file.
    cut = keep[-10]  # 10 rows of 48 KiB + the small one fit in the 1 MiB freed
    s.sql(f"DELETE FROM {DB}.{TABLE} WHERE id < %s", (cut,))
    assert s.value(f"SELECT queue_compact('{DB}.{TABLE}')") == 1
    assert path.stat().st_size < 12 * ROW_BYTES
    assert _rows(s) == [r for r in want if r[0] >= cut]


def test_consumers_drain_a_full_file_system(full_fs, binlog):
    """A full disk must not stop consumers: every row of a queue that filled its file system can
    be consumed, one queue_end() at a time, with the binary log on (each removal a two-phase
    statement: a prepare record, then a commit record) and off. The engine keeps room for
    them (docs/recovery.md "Full file system"); with the binary log on they got error 1114
    after a few rows (issue 40)."""
    s, dbdir = full_fs
    ok, errno, _ = _fill_until_full(s)
    assert errno == ER_RECORD_FILE_FULL
    c = s.connect(db=DB)
    consumed = []
    for want in ok:
        assert value(c, f"SELECT queue_wait('{TABLE}', 0)") == 1
        assert value(c, f"SELECT id FROM {TABLE}") == want
        try:
            assert value(c, "SELECT queue_end()") == 1
        except pymysql.MySQLError as e:
            pytest.fail(f"queue_end() of row {want}, after {len(consumed)} of {len(ok)} rows: {e}")
        consumed.append(want)
    assert s.value(f"SELECT COUNT(*) FROM {DB}.{TABLE}") == 0
    s.restart(kill=True)
    assert s.value(f"SELECT COUNT(*) FROM {DB}.{TABLE}") == 0
