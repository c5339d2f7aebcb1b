"""Rows of 16 MiB and close to max_allowed_packet (64 MiB) in a LONGBLOB column round-trip
byte-exact through INSERT, SELECT, queue_wait/queue_end, kill -9 + restart, clean restart
and compaction.
"""
import hashlib
import os
import random

import pytest

from sqlcheck import query, value

MAX_PACKET = 64 << 20
# Client side: pymysql's own limit must not be the one tested.
CLIENT = {"max_allowed_packet": 2 * MAX_PACKET}


def _ascii(n, seed):
    """n bytes that need no escaping in a statement (so the statement stays under the packet)."""
    rnd = random.Random(seed)
    alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    block = bytes(rnd.choice(alphabet) for _ in range(1 << 16))
    return (block * (n // len(block) + 1))[:n - 8] + rnd.getrandbits(64).to_bytes(8, "little").hex()[:8].encode()


ROWS = {
    1: os.urandom(16 << 20),          # 16 MiB, every byte value (escaped by the client)
    2: b"small",
    3: os.urandom((16 << 20) - 1),    # 0xFFFFFF bytes: the protocol's packet-split boundary
    4: _ascii(MAX_PACKET - (8 << 10), seed=4),  # just under max_allowed_packet with the statement
    5: os.urandom(1 << 20),
}


@pytest.fixture
def big_server(server_factory):
    s = server_factory.new(extra_args=[f"--max-allowed-packet={MAX_PACKET}"])
    yield s
    s.destroy(keep_dir=bool(os.environ.get("Q4M_KEEP_TMP")))


def _digests(ids):
    return [(i, len(ROWS[i]), hashlib.sha256(ROWS[i]).hexdigest()) for i in ids]


def _stored(s):
    return s.sql("SELECT id, LENGTH(body), SHA2(body, 256) FROM test.q")


def _check_bytes(c, ids):
    """Fetches every body to the client and compares byte for byte."""
    got = query(c, "SELECT id, body FROM q")
    assert [i for i, _ in got] == ids
    for i, body in got:
        assert body == ROWS[i], f"row {i}: {len(body)} bytes back, {len(ROWS[i])} inserted; differ"


def _consume_one(s, expect_id):
    c = s.connect(**CLIENT)
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    rows = query(c, "SELECT id, body FROM q")
    assert len(rows) == 1 and rows[0][0] == expect_id
    assert rows[0][1] == ROWS[expect_id]
    assert value(c, "SELECT queue_end()") == 1
    c.close()


def test_large_rows_round_trip(big_server):
    s = big_server
    s.sql("CREATE TABLE test.q (id INT NOT NULL, body LONGBLOB) ENGINE=QUEUE")
    c = s.connect(**CLIENT)
    for i, body in ROWS.items():
        query(c, "INSERT INTO q VALUES (%s, %s)", (i, body))
    ids = sorted(ROWS)
    assert _stored(s) == _digests(ids)
    _check_bytes(c, ids)

    s.restart(kill=True)
    assert _stored(s) == _digests(ids)

    _consume_one(s, 1)
    ids.remove(1)
    s.sql("DELETE FROM test.q WHERE id = 2")
    ids.remove(2)
    file_before = s.value("SELECT FILE_BYTES FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")
    for concurrent in ("ON", "OFF"):
        s.sql(f"SET GLOBAL queue_use_concurrent_compaction = {concurrent}")
        assert s.value("SELECT queue_compact('test.q')") == 1
        assert _stored(s) == _digests(ids)
    file_after = s.value("SELECT FILE_BYTES FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")
    assert file_after < file_before - (16 << 20)
    _check_bytes(s.connect(**CLIENT), ids)

    s.restart(kill=True)
    assert _stored(s) == _digests(ids)
    s.restart()  # clean: the next open reads the index snapshot
    assert _stored(s) == _digests(ids)
    _check_bytes(s.connect(**CLIENT), ids)

    for i in list(ids):
        _consume_one(s, i)
    assert s.value("SELECT COUNT(*) FROM test.q") == 0
