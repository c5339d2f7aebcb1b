"""queue_background_sync_ms (docs/recovery.md, "Background syncs"): with queue_binlog_redo the
commit path syncs no QUEUE file, so every chunk written since the last sync carries the
`unsynced` flag (a power cut may keep it and lose what precedes it). After a crash, a chunk the
disk damaged anywhere in that stretch read as a lost tail: recovery cut it and everything after
it, silently (the redo from the binary log then brought the acknowledged parts back, and the
damage went unseen). The background sync bounds the stretch: the first chunk written after a
sync is unflagged, and a table idle since the last sync gets a synced mark, so a chunk damaged
before the last background sync is refused as corruption, naming it, and the file is left as it
is.

The server is killed (kill -9: no clean close, so no synced mark of the close) and a byte of an
early chunk flipped, as a bad sector would."""
import struct
import time

import pytest

from sqlcheck import query, sql_error, value

REDO = ["--log-bin=mysql-bin", "--binlog-format=ROW", "--server-id=1", "--sync-binlog=1", "--queue-binlog-redo=ON"]
UNSYNCED = 1 << 31


def _body(i):
    return f"row body {i:03d} " + "z" * 60


def _chunks(path):
    """(offset, body length, unsynced flag) of each whole chunk (preallocated zeros after)."""
    b = path.read_bytes()
    out, pos = [], 16
    while pos + 16 <= len(b) and b[pos:pos + 4] == b"Q4MC":
        (flags_len,) = struct.unpack_from("<I", b, pos + 4)
        n = flags_len & ~UNSYNCED
        out.append((pos, n, bool(flags_len & UNSYNCED)))
        pos += 16 + n
    return out


def _status(s, name):
    return int(dict((r[1], r[2]) for r in s.sql("SHOW ENGINE QUEUE STATUS"))[name])


def _wait_above(s, name, floor, seconds=60):
    deadline = time.monotonic() + seconds
    while _status(s, name) <= floor:
        assert time.monotonic() < deadline, f"{name} stayed at {floor} for {seconds} s"
        time.sleep(0.02)


def _insert(c, ids):
    for i in ids:
        query(c, "INSERT INTO q VALUES (%s, %s)", (i, _body(i)))


def _flip_row(path, i):
    """Flips a byte of row i's payload; returns the offset of the chunk holding it."""
    at = path.read_bytes().find(_body(i).encode())
    assert at > 0
    chunk = max(off for off, _, _ in _chunks(path) if off < at)
    with open(path, "r+b") as f:
        f.seek(at + 5)
        b = f.read(1)[0]
        f.seek(at + 5)
        f.write(bytes([b ^ 0x08]))
    return chunk


def _server(server_factory, ms):
    s = server_factory.new(extra_args=REDO + [f"--queue-background-sync-ms={ms}"], at_startup=True)
    s.sql("CREATE TABLE test.q (id INT NOT NULL, body VARCHAR(200) NOT NULL) ENGINE=QUEUE")
    return s


@pytest.mark.parametrize("after", ["more-writes", "idle"])
def test_a_chunk_damaged_before_the_last_background_sync_is_refused_after_a_crash(server_factory, after):
    s = _server(server_factory, 50)
    try:
        c = s.connect()
        _insert(c, range(1, 21))
        path = s.datadir / "test" / "q.Q4M"
        if after == "more-writes":  # a sync after row 20, then chunks: the first one is unflagged
            _wait_above(s, "background_syncs", _status(s, "background_syncs"))
            _insert(c, range(21, 41))
            for i in range(1, 6):
                assert value(c, "SELECT queue_wait('q', 0)") == 1
                assert value(c, "SELECT id FROM q") == i
                assert value(c, "SELECT queue_end()") == 1
        else:  # idle after the sync: the next pass appends the synced mark
            _wait_above(s, "background_sync_marks", _status(s, "background_sync_marks"))
            assert _chunks(path)[-1][1:] == (0, False), "the mark"
        s.kill9()
        chunks = _chunks(path)
        chunk = _flip_row(path, 10)
        damaged = path.read_bytes()
        s.start()
        errno, msg = sql_error(s.connect(), "SELECT COUNT(*) FROM test.q")
        assert errno, "a chunk damaged before the last sync must refuse the open"
        want = f"corrupt chunk at offset {chunk}: chunk body checksum mismatch"
        assert want in msg or want in s.err_log_since_start(), (errno, msg)
        assert path.read_bytes() == damaged, "nothing is cut or changed: the file is left for a human"
        # What told it: an unflagged chunk after the damage (without the sync every chunk from
        # row 10's on would be flagged, a lost tail).
        assert [flagged for off, _, flagged in chunks if off > chunk].count(False) >= 1
    finally:
        s.destroy()


def test_without_background_syncs_the_damage_is_cut_as_a_lost_tail(server_factory):
    """The same damage with queue_background_sync_ms=0: every chunk after the first is flagged,
    so the open cuts the file at the damaged chunk (the redo from the binary log brings the
    acknowledged rows back): the damage goes unreported. What the test above guards against."""
    s = _server(server_factory, 0)
    try:
        c = s.connect()
        _insert(c, range(1, 41))
        path = s.datadir / "test" / "q.Q4M"
        s.kill9()
        chunk = _flip_row(path, 10)
        assert all(flagged for off, _, flagged in _chunks(path) if off > chunk)
        s.start()
        c = s.connect()
        assert value(c, "SELECT COUNT(*) FROM test.q") == 40  # no error
        assert _status(s, "background_syncs") == 0
        flipped = bytearray(_body(10).encode())
        flipped[5] ^= 0x08
        assert bytes(flipped) not in path.read_bytes(), "the damaged chunk was cut"
    finally:
        s.destroy()
