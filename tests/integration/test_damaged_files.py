"""Damaged data files found at open, with the binary log on and off (issue 40 item 10): a table
cleanly shut down, its index snapshot removed (so the open walks every chunk), then damaged.

- A damaged chunk followed by valid ones is damage, never a torn tail: the open is refused
  naming the chunk, in both modes. (With the binary log on, every chunk used to carry the
  `unsynced` flag, since a statement's commit record is written without a sync, so recovery
  took the damage for a lost tail and cut everything after it: consumed rows came back and
  later rows were gone, silently.)
- A torn last chunk is cut as a torn tail, and the table stays usable: with the binary log on
  that chunk is the commit record of the last statement's two-phase part, which is resolved
  at open against the binary log, so no prepared part is left that DROP TABLE refuses to lose.
"""
import struct

import pytest

from binlog_modes import both_binlog_modes
from sqlcheck import query, sql_error, value


FILE_HEADER = 16
CHUNK_HEADER = 16
CHUNK_MAGIC = b"Q4MC"
UNSYNCED = 1 << 31


def _body(i):
    return f"row body {i:03d} " + "y" * 60


def _chunks(path):
    """(offset, body length, unsynced flag) of each chunk of a data file."""
    data = path.read_bytes()
    out, pos = [], FILE_HEADER
    while pos + CHUNK_HEADER <= len(data):
        assert data[pos:pos + 4] == CHUNK_MAGIC, f"no chunk at {pos}"
        (flags_len,) = struct.unpack_from("<I", data, pos + 4)
        n = flags_len & ~UNSYNCED
        out.append((pos, n, bool(flags_len & UNSYNCED)))
        pos += CHUNK_HEADER + n
    assert pos == len(data), "a clean shutdown leaves whole chunks only"
    return out


def _table_of_40_rows_1_to_10_consumed(s):
    """One INSERT per row (one statement, one commit), rows 1-10 consumed one at a time, a clean
    shutdown, its index snapshot removed; returns the data file's path (server stopped)."""
    s.sql("CREATE TABLE test.q (id INT NOT NULL, body VARCHAR(200) NOT NULL) ENGINE=QUEUE")
    c = s.connect()
    for i in range(1, 41):
        query(c, "INSERT INTO q VALUES (%s, %s)", (i, _body(i)))
    for i in range(1, 11):
        assert value(c, "SELECT queue_wait('q', 0)") == 1
        assert value(c, "SELECT id FROM q") == i
        assert value(c, "SELECT queue_end()") == 1
    s.stop()
    path = s.datadir / "test" / "q.Q4M"
    snapshot = path.with_name("q.Q4M.idx")
    if snapshot.exists():
        snapshot.unlink()
    return path


def _flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)[0]
        f.seek(at)
        f.write(bytes([b ^ 0x08]))


@both_binlog_modes
def test_a_damaged_middle_chunk_refuses_the_open_naming_it(fresh_server):
    s = fresh_server
    path = _table_of_40_rows_1_to_10_consumed(s)
    data = path.read_bytes()
    at = data.find(_body(26).encode())
    assert at > 0
    chunk = max(off for off, _, _ in _chunks(path) if off < at)
    _flip(path, at + 5)
    damaged = path.read_bytes()
    s.start()
    errno, msg = sql_error(s.connect(), "SELECT COUNT(*) FROM test.q")
    assert errno, "a damaged chunk followed by valid ones must refuse the open"
    log = s.err_log_since_start()
    want = f"corrupt chunk at offset {chunk}: chunk body checksum mismatch"
    assert want in msg or want in log, (errno, msg, log[-2000:])
    assert path.read_bytes() == damaged, "nothing is cut or changed: the file is left for a human"


@both_binlog_modes
@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_torn_last_chunk_is_cut_and_leaves_nothing_prepared(fresh_server, binlog, damage):
    s = fresh_server
    path = _table_of_40_rows_1_to_10_consumed(s)
    last, n, _ = _chunks(path)[-1]
    if damage == "truncated":
        with open(path, "r+b") as f:
            f.truncate(last + CHUNK_HEADER + n - 3)
    else:
        _flip(path, last + CHUNK_HEADER + n - 2)
    s.start()
    c = s.connect()
    # The last statement was the consumption of row 10: with the binary log on its commit
    # record (the last chunk) is lost but the binary log has it, so it is committed at open;
    # with it off its REMOVE (the last chunk) is a torn tail and row 10 is back.
    ids = [r[0] for r in query(c, "SELECT id FROM q")]
    assert ids == (list(range(11, 41)) if binlog else list(range(10, 41))), ids
    assert query(c, "XA RECOVER") == []
    query(c, "INSERT INTO q VALUES (41, 'after')")
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT id FROM q") == ids[0]
    assert value(c, "SELECT queue_end()") == 1
    query(c, "DROP TABLE q")
    assert not path.exists()


def test_drop_table_discards_a_part_nothing_can_decide(server_factory):
    """Binary log off, the engine loaded at startup (tc.log: two-phase commit for a transaction
    with InnoDB): the lost commit record of such a transaction cannot be decided (no binary log
    to ask), so its part stays prepared; DROP TABLE drops the table anyway, with a warning that
    says what is lost (it used to refuse for good: 1210 "would lose prepared transaction parts")."""
    s = server_factory.new(at_startup=True, binlog=False)
    try:
        s.sql("CREATE TABLE test.q (id INT NOT NULL) ENGINE=QUEUE")
        s.sql("CREATE TABLE test.t (id INT PRIMARY KEY) ENGINE=InnoDB")
        c = s.connect()
        query(c, "INSERT INTO q VALUES (1)")
        query(c, "BEGIN")
        query(c, "INSERT INTO t VALUES (2)")
        query(c, "INSERT INTO q VALUES (2)")
        query(c, "COMMIT")
        s.stop()
        path = s.datadir / "test" / "q.Q4M"
        path.with_name("q.Q4M.idx").unlink(missing_ok=True)
        last, n, _ = _chunks(path)[-1]
        with open(path, "r+b") as f:  # the transaction's commit record, torn
            f.truncate(last + CHUNK_HEADER + n - 3)
        s.start()
        c = s.connect()
        assert [r[0] for r in query(c, "SELECT id FROM q")] == [1]  # row 2 is in the prepared part
        assert "cannot tell their outcome" in s.err_log_since_start()
        with c.cursor() as cur:
            cur.execute("DROP TABLE q")
            cur.execute("SHOW WARNINGS")
            warnings = cur.fetchall()
        assert any("DROP TABLE discarded 1 prepared transaction part" in w[2] for w in warnings), warnings
        assert not path.exists()
    finally:
        s.destroy()
