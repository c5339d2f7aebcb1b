"""queue_set_srcid(): relay dedup, also across a crash (the original lost this state in recovery)."""
import pytest

from sqlcheck import query, value


def _relay(c, source, mode, rowid, v):
    assert value(c, "SELECT queue_set_srcid(%s, %s, %s)", (source, mode, rowid)) == 1
    query(c, "INSERT INTO test.q VALUES (%s)", (v,))


def _values(server):
    return [r[0] for r in server.sql("SELECT v FROM test.q")]


def test_relayed_rows_are_deduplicated(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    _relay(c, 1, "a", 10, 1)
    _relay(c, 1, "a", 10, 2)   # same id: dropped
    _relay(c, 1, "a", 9, 3)    # older: dropped
    _relay(c, 1, "a", 11, 4)
    _relay(c, 2, "a", 1, 5)    # another source has its own record
    query(c, "INSERT INTO test.q VALUES (6)")  # a plain insert is never deduplicated
    _relay(c, 1, "w", 3, 7)    # reset: accepted although older
    _relay(c, 1, "a", 3, 8)    # ...and the reset record applies from then on
    assert _values(server) == [1, 4, 5, 6, 7]


def test_srcid_applies_to_the_next_insert_only(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect()
    _relay(c, 1, "a", 5, 1)
    assert value(c, "SELECT queue_set_srcid(1, 'a', 5)") == 1
    query(c, "INSERT INTO test.q VALUES (2)")   # dropped: not newer
    query(c, "INSERT INTO test.q VALUES (3)")   # plain insert again
    assert _values(server) == [1, 3]


def test_srcid_is_per_connection(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    a, b = server.connect(), server.connect()
    _relay(a, 1, "a", 5, 1)
    assert value(b, "SELECT queue_set_srcid(1, 'a', 5)") == 1
    query(a, "INSERT INTO test.q VALUES (2)")  # a's srcid was used up; b's does not apply to a
    assert _values(server) == [1, 2]


@pytest.mark.parametrize("kill", [False, True], ids=["clean-restart", "kill9"])
def test_dedup_record_survives_restart(fresh_server, kill):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = s.connect()
    _relay(c, 1, "a", 100, 1)
    _relay(c, 2, "a", 7, 2)
    s.restart(kill=kill)
    c = s.connect()
    _relay(c, 1, "a", 100, 3)  # dropped: the record was rebuilt
    _relay(c, 2, "a", 6, 4)    # dropped
    _relay(c, 1, "a", 101, 5)
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == [1, 2, 5]


def test_dedup_record_survives_compaction_and_crash(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = s.connect()
    for i in range(1, 51):
        _relay(c, 1, "a", i, i)
    while value(c, "SELECT queue_wait('q', 0)") == 1:
        pass  # consume everything: the rows carrying the record are gone
    assert value(c, "SELECT queue_compact('q')") == 1
    s.restart(kill=True)
    c = s.connect()
    _relay(c, 1, "a", 50, 99)  # dropped
    _relay(c, 1, "a", 51, 51)
    assert [r[0] for r in s.sql("SELECT v FROM test.q")] == [51]
