"""Conditional subscriptions: queue_wait('q:expr')."""
import time

import pytest

from sqlcheck import query, start_waiter, value

ROWS = [
    # id, prio, kind, u (INT UNSIGNED), big (BIGINT UNSIGNED), n (nullable), name
    (1, 1, 2, 1, 1, None, "alpha"),
    (2, 5, 1, 4000000000, 18446744073709551615, 7, "beta"),
    (3, 3, 2, 2, 9223372036854775808, None, "gamma"),
    (4, 9, 3, 3000000000, 5, 0, "delta"),
    (5, -4, 1, 0, 0, -1, "alpha"),
]


@pytest.fixture
def q(server):
    server.sql("CREATE TABLE test.q (id INT, prio INT, kind TINYINT, u INT UNSIGNED, big BIGINT UNSIGNED,"
               " n INT NULL, name VARCHAR(20)) ENGINE=QUEUE")
    c = server.connect()
    with c.cursor() as cur:
        cur.executemany("INSERT INTO test.q VALUES (%s, %s, %s, %s, %s, %s, %s)", ROWS)
    return c


def _matches(c, cond):
    """Consumes every row the condition selects; returns their ids in order."""
    ids = []
    while value(c, "SELECT queue_wait(%s, 0)", (f"test.q:{cond}",)) == 1:
        ids.append(value(c, "SELECT id FROM test.q"))
    return ids


@pytest.mark.parametrize("cond, want", [
    ("prio > 3", [2, 4]),
    ("prio >= 3 and kind = 2", [3]),
    ("prio < 0 or kind = 3", [4, 5]),
    ("not (kind = 2)", [2, 4, 5]),
    ("kind = 1 xor prio > 0", [1, 3, 4, 5]),
    ("prio * 2 = 10", [2]),
    ("prio + kind - 1 = 4", [3]),
    ("prio % 2 = 1", [1, 2, 3, 4]),
    ("(kind & 1) = 1", [2, 4, 5]),
    ("(kind | 4) = 6", [1, 3]),
    ("(kind ^ 3) = 0", [4]),
    ("n is null", [1, 3]),
    ("n is not null and n <= 0", [4, 5]),
    ("prio <> 5 and prio != 9", [1, 3, 5]),
    ("u > 3000000000", [2]),                   # unsigned INT must not be sign-extended
    ("u >= 3000000000", [2, 4]),
    ("big > 9223372036854775807", [2, 3]),     # unsigned BIGINT above the signed range
    ("big = 18446744073709551615", [2]),
    ("-prio = 4", [5]),
    ("id between 2 and 3", None),              # optional syntax: only must not crash
    ("name = 'alpha'", [1, 5]),
    ("name <> 'alpha' and prio > 3", [2, 4]),
])
def test_condition_selects_rows(server, q, cond, want):
    if want is None:
        try:
            _matches(q, cond)
        except Exception:
            pass
        assert server.value("SELECT 1") == 1
        return
    assert _matches(q, cond) == want
    # rows not selected stay in the queue, untouched, in order
    left = [r[0] for r in server.sql("SELECT id FROM test.q")]
    assert left == [r[0] for r in ROWS if r[0] not in want]


def test_same_table_listed_twice_is_a_priority_queue(server, q):
    got = []
    while True:
        idx = value(q, "SELECT queue_wait('q:prio > 4', 'q:prio <= 4', 0)")
        if idx == 0:
            break
        got.append((idx, value(q, "SELECT id FROM q")))
    assert got == [(1, 2), (1, 4), (2, 1), (2, 3), (2, 5)]


def test_condition_waiter_is_woken_only_by_a_matching_row(server, q):
    while value(q, "SELECT queue_wait('q', 0)") == 1:
        pass  # empty the queue
    c, bg = start_waiter(server, "SELECT queue_wait('q:prio > 100', 60)")
    server.sql("INSERT INTO test.q (id, prio) VALUES (10, 1)")
    time.sleep(0.3)
    assert not bg.done(), "a non-matching row must not wake the waiter with it"
    server.sql("INSERT INTO test.q (id, prio) VALUES (11, 101)")
    assert bg.join() == 1
    assert query(c, "SELECT id FROM q") == [(11,)]
    assert [r[0] for r in server.sql("SELECT id FROM test.q")] == [10]


def test_condition_cache_across_calls_stays_correct(server, q):
    # the same condition text many times (compiled once, cached) and different texts interleaved
    for _ in range(20):
        assert value(q, "SELECT queue_wait('q:prio > 100', 0)") == 0
        assert value(q, "SELECT queue_wait('q:kind = 7', 0)") == 0
    assert value(q, "SELECT queue_wait('q:prio = 9', 0)") == 1
    assert value(q, "SELECT id FROM q") == 4
