"""Conditional subscriptions: queue_wait('q:expr')."""
import time

import pytest

from sqlcheck import expect_error, query, start_waiter, value

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


PRIORITY_WAIT = "SELECT queue_wait('pq:prio=0', 'pq:prio=1', {})"


def _status_counter(server, name):
    return int(dict((r[1], r[2]) for r in server.sql("SHOW ENGINE QUEUE STATUS"))[name])


def _priority_queue(server):
    server.sql("CREATE TABLE test.pq (id INT NOT NULL, prio TINYINT NOT NULL) ENGINE=QUEUE")


def test_a_blocked_waiter_takes_the_first_listed_condition_of_one_insert(server):
    """Q4M: a waiter already blocked when one INSERT brings rows of several listed levels
    takes the first listed level's row, as if the rows had been there before the wait."""
    _priority_queue(server)
    passed_over = _status_counter(server, "wait_handoffs_passed_over")
    c, bg = start_waiter(server, PRIORITY_WAIT.format(60))
    server.sql("INSERT INTO test.pq VALUES (1,1),(2,0),(3,1)")
    assert bg.join() == 1
    assert query(c, "SELECT id, prio FROM pq") == [(2, 0)]
    assert _status_counter(server, "wait_handoffs_passed_over") == passed_over + 1  # row 1, handed first
    # The level-2 row it passed over was not handed out: delivered once, in order.
    for want in (1, 3):
        assert value(c, PRIORITY_WAIT.format(0)) == 2
        assert query(c, "SELECT id, queue_delivery_count() FROM pq") == [(want, 1)]
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.pq") == 0


def test_the_row_a_waiter_passes_over_goes_to_the_next_waiter(server):
    _priority_queue(server)
    c, bg_c = start_waiter(server, PRIORITY_WAIT.format(60))
    d, bg_d = start_waiter(server, "SELECT queue_wait('pq:prio=1', 60)")
    server.sql("INSERT INTO test.pq VALUES (1,1),(2,0)")
    assert bg_c.join() == 1
    assert query(c, "SELECT id FROM pq") == [(2,)]
    assert bg_d.join() == 1
    assert query(d, "SELECT id, queue_delivery_count() FROM pq") == [(1, 1)]


def test_condition_cache_across_calls_stays_correct(server, q):
    # the same condition text many times (compiled once, cached) and different texts interleaved
    for _ in range(20):
        assert value(q, "SELECT queue_wait('q:prio > 100', 0)") == 0
        assert value(q, "SELECT queue_wait('q:kind = 7', 0)") == 0
    assert value(q, "SELECT queue_wait('q:prio = 9', 0)") == 1
    assert value(q, "SELECT id FROM q") == 4


DUE_NOW = "CONCAT('test.jobs:run_at <= ', UNIX_TIMESTAMP() {})"


def _due(c, later_s=0):
    """Consumes every job due `later_s` seconds from now (the README's delayed-message recipe)."""
    now = DUE_NOW.format(f"+ {later_s}" if later_s else "")
    ids = []
    while True:
        rows = query(c, f"SELECT id FROM test.jobs WHERE queue_wait({now}, 0)")
        if not rows:
            return ids
        ids.append(rows[0][0])
        assert value(c, "SELECT queue_end()") == 1


def test_delayed_messages_with_a_timestamp_column_and_the_current_time(server):
    """Delayed delivery (SQS DelaySeconds, pgmq's vt): a TIMESTAMP column says when a job is
    due; the consumer's condition compares it with UNIX_TIMESTAMP(), so a new condition text
    every second. Jobs not yet due stay queued and are skipped, not lost; due ones come out
    in insert order. 'Later' is simulated by adding seconds to the consumer's clock."""
    server.sql("CREATE TABLE test.jobs (id INT NOT NULL, run_at TIMESTAMP NOT NULL) ENGINE=QUEUE")
    server.sql("INSERT INTO test.jobs VALUES (1, NOW() + INTERVAL 1 HOUR), (2, NOW() - INTERVAL 1 SECOND),"
               " (3, NOW() + INTERVAL 2 HOUR), (4, NOW())")
    c = server.connect()
    assert _due(c) == [2, 4]
    assert server.value("SELECT COUNT(*) FROM test.jobs") == 2  # the delayed ones are still there
    assert _due(c, later_s=5400) == [1]
    assert _due(c, later_s=9000) == [3]
    assert server.value("SELECT COUNT(*) FROM test.jobs") == 0
    # A consumer keeps asking with its clock moving on (a new condition text each time), as a
    # worker loop does once a second: thousands of distinct texts stay correct.
    server.sql("INSERT INTO test.jobs VALUES (5, NOW() + INTERVAL 1 DAY)")
    for later_s in range(3000):
        if later_s % 500 == 0:
            server.sql(f"INSERT INTO test.jobs VALUES ({100 + later_s}, FROM_UNIXTIME(UNIX_TIMESTAMP() + {later_s}))")
        got = query(c, f"SELECT id FROM test.jobs WHERE queue_wait({DUE_NOW.format(f'+ {later_s}')}, 0)")
        if later_s % 500 == 0:  # the job just inserted is due at once, and only then
            assert got == [(100 + later_s,)]
            assert value(c, "SELECT queue_end()") == 1
        else:
            assert got == []
    assert [r[0] for r in server.sql("SELECT id FROM test.jobs")] == [5]


def test_a_compressed_column_is_refused_not_misread(server):
    """A COMPRESSED column's stored bytes are not its value: a condition on it would
    compare compressed bytes, so it is an error naming the column."""
    server.sql("CREATE TABLE test.z (id INT, body VARCHAR(200) COMPRESSED) ENGINE=QUEUE")
    server.sql("INSERT INTO test.z VALUES (1, REPEAT('x', 100))")
    c = server.connect()
    expect_error(c, "SELECT queue_wait(\"test.z:body = 'abc'\", 0)", "test.z", "column 'body' is COMPRESSED")
    assert value(c, "SELECT queue_wait('test.z:id = 1', 0)") == 1  # other columns still work
    assert value(c, "SELECT body = REPEAT('x', 100) FROM test.z") == 1


COLLATION_CASES = [
    # column definition, value stored, literal, does SQL's WHERE col = literal match?
    ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", "Alice", "ALICE", True),
    ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", "alice ", "alice", True),  # PAD SPACE
    ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", "straße", "STRASSE", True),
    ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_nopad_ci", "alice ", "alice", False),
    ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "Alice", "alice", False),
    ("VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "alice ", "alice", True),
    ("CHAR(10) CHARACTER SET latin1", "Alice", "aLICE", True),  # latin1_swedish_ci
    ("TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", "Alice", "alice", True),
    ("VARBINARY(20)", "Alice", "alice", False),
    ("BLOB", "Alice", "alice", False),
]


@pytest.mark.parametrize("column, stored, literal, sql_match", COLLATION_CASES,
                         ids=[f"{c.split(' COLLATE ')[-1].split()[0]}-{s!r}-{lit!r}"
                              for c, s, lit, _ in COLLATION_CASES])
def test_strings_compare_as_sql_does_under_the_column_collation(server, column, stored, literal, sql_match):
    """A condition on a string column matches exactly the rows SQL's WHERE would: case, accents
    and trailing spaces as the column's collation says (a consumer's 'q:name="alice"' finds
    the row a SELECT ... WHERE name = 'alice' shows); binary columns compare bytes."""
    server.sql(f"CREATE TABLE test.c (id INT, s {column}) ENGINE=QUEUE")
    c = server.connect()
    query(c, "SET NAMES utf8mb4")
    query(c, "INSERT INTO test.c VALUES (1, %s)", (stored,))
    assert value(c, "SELECT COUNT(*) FROM test.c WHERE s = %s", (literal,)) == int(sql_match)
    cond = f"test.c:s = '{literal}'"
    assert value(c, "SELECT queue_wait(%s, 0)", (cond,)) == int(sql_match)
    if sql_match:
        assert value(c, "SELECT queue_end()") == 1
    # IN and ordering follow the same collation.
    else:
        assert value(c, "SELECT queue_wait(%s, 0)", (f"test.c:s IN ('zzz', '{literal}')",)) == 0


def test_two_columns_under_different_collations_are_refused(server):
    server.sql("CREATE TABLE test.c (a VARCHAR(10) COLLATE latin1_general_ci, b VARCHAR(10) COLLATE latin1_bin, "
               "v VARBINARY(10)) ENGINE=QUEUE")
    server.sql("INSERT INTO test.c VALUES ('X', 'x', 'x')")
    c = server.connect()
    expect_error(c, "SELECT queue_wait('test.c:a = b', 0)", "test.c",
                 "cannot compare column 'a' (latin1_general_ci) with column 'b' (latin1_bin): their collations differ")
    assert value(c, "SELECT queue_wait('test.c:a = v', 0)") == 0  # a binary operand: bytes, as SQL
    assert value(c, "SELECT queue_wait('test.c:a = \"x\" AND b = \"x\"', 0)") == 1


@pytest.mark.parametrize("column_charset, client_charset", [("latin1", "utf8mb4"), ("utf8mb4", "latin1"),
                                                            ("cp1251", "utf8mb4"), ("utf8mb4", "utf8mb4")])
def test_literals_are_converted_into_the_column_character_set(server, column_charset, client_charset):
    """A condition's literal arrives in the client's character set and, as in SQL, is converted
    into the column's before the comparison: 'café' sent as UTF-8 finds a latin1 'café' (MariaDB
    10.11 creates latin1 columns by default). A literal the column's character set cannot hold
    is refused, as SQL refuses that comparison ("Illegal mix of collations")."""
    text = "Привет" if column_charset == "cp1251" else "café"
    server.sql(f"CREATE TABLE test.c (id INT, s VARCHAR(20) CHARACTER SET {column_charset}) ENGINE=QUEUE")
    c = server.connect(charset=client_charset)
    query(c, "INSERT INTO test.c VALUES (1, %s), (2, 'other')", (text,))
    assert value(c, "SELECT id FROM test.c WHERE s = %s", (text,)) == 1  # what SQL finds
    assert value(c, "SELECT queue_wait(%s, 0)", (f"test.c:s = '{text}'",)) == 1
    assert value(c, "SELECT id FROM test.c") == 1
    assert value(c, "SELECT queue_end()") == 1
    if column_charset == "latin1" and client_charset == "utf8mb4":
        expect_error(c, "SELECT id FROM test.c WHERE s = '日本'", "Illegal mix of collations")
        expect_error(c, "SELECT queue_wait('test.c:s = \"日本\"', 0)", "test.c",
                     "string '日本' has characters that column 's' (latin1_swedish_ci) cannot hold")
