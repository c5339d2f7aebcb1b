"""Limits as row policies (issue 30): GROUP_CONCURRENCY (rows of one MESSAGE_GROUP_COLUMN value
out at once), GROUP_RATE/GROUP_BURST (hand-outs per second per key, a token bucket),
MAX_IN_FLIGHT and MAX_RATE/MAX_BURST (the same for the whole table). A row over a limit waits
without holding up other keys; a waiting consumer sleeps until a slot frees or a token comes.

Pass/fail checks are ceilings (never more out than the limit, never more hand-outs than the
bucket allows), never a lower bound on a rate: the achieved rate is measured by
`q4m-bench --scenario rate-limit` (docs/limits.md)."""
import json
import os
import random
import threading
import time
from collections import Counter, defaultdict

import pymysql
import pytest

from sqlcheck import Background, expect_error, query, start_waiter, value, wait_until


def _jobs(server, options, rows=(), name="jobs"):
    server.sql(f"CREATE TABLE test.{name} (id INT, k VARCHAR(20), msg TEXT) ENGINE=QUEUE " + options)
    if rows:
        _insert(server, rows, name)


def _insert(server, rows, name="jobs"):
    server.sql(f"INSERT INTO test.{name} VALUES " + ", ".join(
        f"({i}, {'NULL' if k is None else repr(k)}, 'job {i}')" for i, k in rows))


def _take(c, timeout=0, name="jobs", cond=None):
    """The id of the row connection c takes now, None if none."""
    arg = name + (":" + cond if cond else "")
    rows = query(c, f"SELECT id FROM {name} WHERE queue_wait(%s, {timeout})", (arg,))
    return rows[0][0] if rows else None


def _stats(server, name="jobs"):
    return server.queue_stats(f"test.{name}")


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# ---- concurrency per key

def test_group_concurrency_lets_n_rows_of_a_key_out_in_order_and_no_more(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=2",
          [(1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "a"), (6, None)])
    c = [server.connect() for _ in range(6)]
    assert _take(c[0]) == 1
    assert _take(c[1]) == 2
    assert _take(c[2]) == 4       # a is at its limit: b goes
    assert _take(c[3]) == 6       # no key: never held back
    assert _take(c[4]) is None    # a's 3 and 5 wait for a slot
    st = _stats(server)
    assert (st["groups_at_limit"], st["rows_held_back"]) == (1, 2)
    held = server.sql("SELECT GROUP_KEY, OUT_ROWS, READY_ROWS, HELD_ROWS, WAITING_FOR "
                      "FROM information_schema.QUEUE_HELD_GROUPS WHERE TABLE_NAME='jobs'")
    assert [tuple(r) for r in held] == [("a", 2, 0, 2, "GROUP_CONCURRENCY")]
    assert value(c[1], "SELECT queue_end()") == 1   # 2 done: 3 may go, 5 still waits
    assert _take(c[4]) == 3
    assert _take(c[5]) is None
    assert value(c[0], "SELECT queue_abort()") == 1  # 1 back: it goes before 5
    assert _take(c[5]) == 1


def test_a_consumer_waiting_on_a_key_at_its_limit_is_woken_when_a_slot_frees(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=2", [(1, "a"), (2, "a"), (3, "a")])
    c1, c2 = server.connect(), server.connect()
    assert (_take(c1), _take(c2)) == (1, 2)
    w, bg = start_waiter(server, "SELECT queue_wait('test.jobs', 60)")
    assert value(c2, "SELECT queue_end()") == 1
    assert bg.join() == 1
    assert query(w, "SELECT id FROM jobs") == [(3,)]


def test_sixteen_consumers_never_exceed_a_keys_concurrency(server):
    """A ledger of owners over time: each consumer records its take and, before its
    queue_end(), its end, with a counter per key checked under one lock. The engine frees a
    slot only at queue_end(), after the ledger let go of it, so the ledger never sees more
    owners of a key than the engine let out."""
    limit, keys, per_key, consumers = 3, 5, 40, 16
    _jobs(server, f"MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY={limit}")
    rows = [(i * keys + k, f"key{k}") for i in range(per_key) for k in range(keys)]
    _insert(server, rows)
    lock = threading.Lock()
    out = Counter()
    peak = Counter()
    seen = Counter()
    violations = []

    def consume(n):
        c = server.connect()
        rng = random.Random(n)
        while True:
            got = query(c, "SELECT id, k FROM jobs WHERE queue_wait('jobs', 2)")
            if not got:
                return
            (rid, key), = got
            with lock:
                out[key] += 1
                seen[rid] += 1
                peak[key] = max(peak[key], out[key])
                if out[key] > limit:
                    violations.append(f"{key}: {out[key]} owners at once (row {rid})")
            time.sleep(rng.uniform(0.002, 0.02))
            with lock:
                out[key] -= 1
            if rng.random() < 0.1:
                assert value(c, "SELECT queue_abort()") == 1
                with lock:
                    seen[rid] -= 1
            else:
                assert value(c, "SELECT queue_end()") == 1

    workers = [Background(consume, n) for n in range(consumers)]
    for w in workers:
        w.join(300)
    assert violations == []
    assert sorted(seen) == sorted(r for r, _ in rows) and set(seen.values()) == {1}  # each once
    assert max(peak.values()) > 1  # N > 1 rows of a key did go out together
    assert _stats(server)["rows"] == 0


def test_a_saturated_key_does_not_starve_other_keys(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1",
          [(i, "hot") for i in range(1, 201)] + [(1000 + i, f"cold{i}") for i in range(10)])
    hot = server.connect()
    assert _take(hot) == 1          # hot is at its limit, with 199 rows behind it
    other = server.connect()
    got = []
    for _ in range(10):              # every other key goes at once, none waits for hot
        rid = _take(other)
        got.append(rid)
        assert value(other, "SELECT queue_end()") == 1
    assert sorted(got) == [1000 + i for i in range(10)]
    assert _take(other) is None
    assert _stats(server)["rows_held_back"] == 199


def test_a_condition_wait_respects_the_limit_and_is_woken_when_the_slot_frees(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1", [(1, "a"), (2, "a"), (3, "b")])
    c1 = server.connect()
    assert _take(c1, cond="k='a'") == 1
    c2 = server.connect()
    assert _take(c2, cond="k='a'") is None   # 2 waits for 1, though it matches
    w, bg = start_waiter(server, "SELECT queue_wait('test.jobs:k=\"a\"', 60)")
    assert value(c1, "SELECT queue_end()") == 1
    assert bg.join() == 1
    assert query(w, "SELECT id FROM jobs") == [(2,)]


def test_a_priority_list_takes_from_the_next_table_while_the_first_is_at_its_limit(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1", [(1, "a"), (2, "a")], name="hi")
    _jobs(server, "", [(10, "x")], name="lo")
    c1, c2 = server.connect(), server.connect()
    assert value(c1, "SELECT queue_wait('hi', 'lo', 0)") == 1
    assert query(c1, "SELECT id FROM hi") == [(1,)]
    assert value(c2, "SELECT queue_wait('hi', 'lo', 0)") == 2   # hi's 2 waits: lo's row
    assert query(c2, "SELECT id FROM lo") == [(10,)]


def test_a_batch_never_breaks_a_keys_concurrency(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=2",
          [(i * 3 + k, f"key{k}") for i in range(5) for k in range(3)])
    c = server.connect()
    got = query(c, "SELECT id, k FROM jobs WHERE queue_wait_batch('jobs', 100, 0)")
    assert Counter(k for _, k in got) == {"key0": 2, "key1": 2, "key2": 2}
    other = server.connect()
    assert value(other, "SELECT queue_wait_batch('jobs', 100, 0)") == 0  # the rest wait
    assert value(c, "SELECT queue_end()") == 1  # the whole batch
    assert value(other, "SELECT queue_wait_batch('jobs', 100, 0)") == 6


def test_a_batch_never_breaks_max_in_flight(server):
    _jobs(server, "MAX_IN_FLIGHT=4", [(i, None) for i in range(1, 11)])
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait_batch('jobs', 3, 0)") == 3
    assert value(b, "SELECT queue_wait_batch('jobs', 100, 0)") == 1
    assert _stats(server)["in_flight"] == 4
    assert value(server.connect(), "SELECT queue_wait('jobs', 0)") == 0
    assert value(a, "SELECT queue_end()") == 1  # the whole batch
    assert value(a, "SELECT queue_wait_batch('jobs', 100, 0)") == 3


def test_an_expired_lease_frees_its_slot(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1 MAX_IN_FLIGHT=1", [(1, "a"), (2, "a")])
    c1 = server.connect()
    query(c1, "SET SESSION queue_lease_timeout = 0.3")
    assert _take(c1) == 1
    c2 = server.connect()
    assert _take(c2) is None
    assert _take(c2, timeout=30) == 1          # the lease ran out: 1 is back, and goes first
    assert value(c2, "SELECT queue_delivery_count()") == 2


def test_a_retry_delay_keeps_the_rows_place_and_a_dead_row_frees_it(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1 MAX_DELIVERIES=2",
          [(1, "a"), (2, "a")])
    c = server.connect()
    assert _take(c) == 1
    assert value(c, "SELECT queue_abort(60)") == 1   # retried later: it keeps its place
    assert _take(c) is None
    assert _stats(server)["delayed_rows"] == 1
    server.sql("ALTER TABLE test.jobs MAX_DELIVERIES=1")  # it is dead now: 2 goes
    assert _take(c) == 2


def test_an_expired_row_frees_its_keys_place(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1 MESSAGE_TTL=1", [(1, "a")])
    c = server.connect()
    assert _take(c) == 1
    assert value(c, "SELECT queue_abort(3)") == 1     # back after its TTL: expires instead
    # Row 2 has the TTL too: inserted half a second later, it expires half a second after
    # row 1 (inserted at once, it expired milliseconds after it, and a consumer woken by row
    # 1's expiry had that long to take it).
    time.sleep(0.5)
    _insert(server, [(2, "a")])
    got = _take(c, timeout=30)
    assert got == 2, (got, _stats(server), server.sql("SHOW PROCESSLIST"))


def test_an_expired_row_frees_its_keys_place_before_its_logged_removal(either_server):
    """With the binary log on, an expired row is removed by a logged transaction of the
    engine's own connection, later (a thread, a statement, the log's sync): the row holds no
    place in its group meanwhile. Here another session's LOCK TABLES ... READ holds that
    removal back (it waits a second for the table, then tries again every second) past the
    expiry of the key's next row. Before, row 1 held key a's place until removed, and row 2,
    never handed out, expired behind it (None). With row 2 inserted milliseconds after row 1,
    as test_an_expired_row_frees_its_keys_place did, any slow removal (a busy machine's
    sync of the binary log) did the same."""
    s = either_server
    _jobs(s, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1 MESSAGE_TTL=2", [(1, "a")])
    c = s.connect()
    assert _take(c) == 1
    assert value(c, "SELECT queue_abort(10)") == 1    # expires (at 2 s) before its delay ends
    time.sleep(1)
    _insert(s, [(2, "a")])                             # expires at 3 s
    locker = s.connect()
    query(locker, "LOCK TABLES test.jobs READ")
    try:
        got = _take(c, timeout=4)                      # before: None (row 2 expired at 3 s)
    finally:
        query(locker, "UNLOCK TABLES")
    assert got == 2, (got, _stats(s))
    assert value(c, "SELECT queue_end()") == 1
    wait_until(lambda: _stats(s)["rows_expired"] == 1, what="row 1's removal")
    assert _stats(s)["rows"] == 0


def test_a_row_a_transaction_ended_holds_its_slot_until_commit_or_rollback(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1 MAX_IN_FLIGHT=1",
          [(1, "a"), (2, "a"), (3, "b")])
    t = server.connect()
    query(t, "BEGIN")
    assert _take(t) == 1
    assert value(t, "SELECT queue_end()") == 1      # consumed by the transaction, not yet gone
    other = server.connect()
    assert _take(other) is None                      # neither 2 (key a) nor 3 (MAX_IN_FLIGHT)
    assert _stats(server)["in_flight"] == 1
    query(t, "ROLLBACK")                              # 1 is back: it goes first
    assert _take(other) == 1
    query(other, "BEGIN")
    assert value(other, "SELECT queue_end()") == 1
    assert _take(t) is None
    query(other, "COMMIT")
    assert _take(t) == 2


@pytest.mark.parametrize("options", ["MESSAGE_GROUP_COLUMN='k'", "MAX_IN_FLIGHT=1",
                                     "MESSAGE_GROUP_COLUMN='k' MAX_IN_FLIGHT=1"])
@pytest.mark.parametrize("mode", ["autocommit", "transaction"])
@pytest.mark.parametrize("form", ["bare", "consume"])
def test_a_q4m_loop_of_waits_on_a_limit_of_1_gets_a_row_at_each_wait(either_server, options, mode, form):
    """Q4M's idiom: the next queue_wait() ends the owned row. Its end (a transaction's, with the
    binary log on or inside BEGIN) takes effect at the statement's or the transaction's commit,
    but its group place and MAX_IN_FLIGHT slot are the wait's at once. Before (issue 40, item
    2), the wait was held back by the row it was ending: [1, 0 after the timeout, 1, 0, 1]."""
    s = either_server
    _jobs(s, options, [(1, "a"), (2, "a"), (3, "a")])
    c = s.connect()
    if mode == "transaction":
        query(c, "BEGIN")
    if form == "bare":
        got = [value(c, "SELECT queue_wait('test.jobs', 10)") for _ in range(3)]
        assert got == [1, 1, 1]  # no wait timed out
        ids = [value(c, "SELECT queue_rowid()")]
    else:
        got = [query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 10)") for _ in range(3)]
        assert got == [[(1,)], [(2,)], [(3,)]]
        ids = [value(c, "SELECT queue_rowid()")]
    assert ids == [3]
    other = s.connect()
    assert _take(other) is None  # row 3 is out: the group, the table's one slot
    assert value(c, "SELECT queue_end()") == 1
    if mode == "transaction":
        assert _stats(s)["rows"] == 3  # removed at the COMMIT
        query(c, "COMMIT")
    assert _stats(s)["rows"] == 0


def test_a_wait_that_ended_a_row_in_a_rolled_back_transaction_gives_it_back_behind_the_next(either_server):
    """The end inside a wait frees the row's group place at once; a ROLLBACK brings the row
    back, where it waits for the group's row that is out (concurrency 1), then goes first."""
    s = either_server
    _jobs(s, "MESSAGE_GROUP_COLUMN='k'", [(1, "a"), (2, "a"), (3, "a")])
    c, other = s.connect(), s.connect()
    query(c, "BEGIN")
    assert _take(c, 10) == 1
    assert _take(c, 10) == 2  # ends 1 (at the COMMIT), takes 2
    query(c, "ROLLBACK")       # 1 is back; c still owns 2 (taking is not transactional)
    assert _take(other) is None  # a's row 2 is out
    assert value(c, "SELECT queue_end()") == 1
    assert _take(other) == 1
    assert _take(other) == 3
    assert value(other, "SELECT queue_end()") == 1
    assert _stats(s)["rows"] == 0


# ---- the whole table

def test_max_in_flight_holds_the_table_and_wakes_a_waiter_when_a_row_ends(server):
    _jobs(server, "MAX_IN_FLIGHT=2", [(1, None), (2, "x"), (3, None)])
    a, b = server.connect(), server.connect()
    assert (_take(a), _take(b)) == (1, 2)
    st = _stats(server)
    assert (st["in_flight"], st["rows_held_back"]) == (2, 1)
    w1, bg1 = start_waiter(server, "SELECT queue_wait('test.jobs', 60)")
    w2, bg2 = start_waiter(server, "SELECT queue_wait('test.jobs', 60)")
    assert value(a, "SELECT queue_end()") == 1
    wait_until(lambda: bg1.done() or bg2.done(), what="a waiter to be served")
    first, other = (w1, bg1), (w2, bg2)
    if not bg1.done():
        first, other = other, first
    assert first[1].join() == 1 and query(first[0], "SELECT id FROM jobs") == [(3,)]
    assert _stats(server)["in_flight"] == 2
    assert not other[1].done()            # one slot freed: one row out
    assert value(b, "SELECT queue_end()") == 1
    _insert(server, [(4, None)])
    assert other[1].join() == 1 and query(other[0], "SELECT id FROM jobs") == [(4,)]


def test_a_condition_waiter_on_a_closed_table_is_woken_when_it_opens(server):
    _jobs(server, "MAX_IN_FLIGHT=1", [(1, None), (2, None), (3, None)])
    a = server.connect()
    assert _take(a) == 1
    w, bg = start_waiter(server, "SELECT queue_wait('test.jobs:id=3', 60)")
    assert value(a, "SELECT queue_end()") == 1
    assert bg.join() == 1
    assert query(w, "SELECT id FROM jobs") == [(3,)]


def test_alter_changes_the_limits_in_place_and_wakes_waiters(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1", [(1, "a"), (2, "a"), (3, "a")])
    data = server.datadir / "test" / "jobs.Q4M"
    inode = os.stat(data).st_ino
    c1 = server.connect()
    assert _take(c1) == 1
    w, bg = start_waiter(server, "SELECT queue_wait('test.jobs', 60)")
    server.sql("ALTER TABLE test.jobs GROUP_CONCURRENCY=3")
    assert bg.join() == 1                 # woken by the new limit
    assert query(w, "SELECT id FROM jobs") == [(2,)]
    assert query(c1, "SELECT id FROM jobs") == [(1,)]  # still its owner: nothing was copied
    assert os.stat(data).st_ino == inode
    server.sql("ALTER TABLE test.jobs GROUP_CONCURRENCY=2")
    assert _take(server.connect()) is None   # 1 and 2 out: 3 waits under the lower limit
    server.sql("ALTER TABLE test.jobs MAX_IN_FLIGHT=1 MAX_RATE='100/min' MAX_BURST=2 GROUP_RATE='5' GROUP_BURST=2")
    assert os.stat(data).st_ino == inode
    assert value(c1, "SELECT queue_end()") == 1
    assert _take(server.connect()) is None   # MAX_IN_FLIGHT=1: 2 is out
    assert _stats(server)["in_flight"] == 1


def test_bad_limit_values_are_clear_errors_naming_the_table_and_option(server):
    c = server.connect()
    base = "CREATE TABLE test.bad (id INT, k INT) ENGINE=QUEUE "
    expect_error(c, base + "MESSAGE_GROUP_COLUMN='k' GROUP_RATE='fast'",
                 "QUEUE table 'test.bad'", "GROUP_RATE: 'fast' is not", code=1478)
    expect_error(c, base + "MAX_RATE='10/fortnight'", "QUEUE table 'test.bad'", "MAX_RATE", "unknown unit", code=1478)
    expect_error(c, base + "MAX_RATE='-5'", "QUEUE table 'test.bad'", "MAX_RATE", code=1478)
    expect_error(c, base + "GROUP_CONCURRENCY=2", "QUEUE table 'test.bad'",
                 "GROUP_CONCURRENCY needs MESSAGE_GROUP_COLUMN", code=1478)
    expect_error(c, base + "MAX_BURST=5", "QUEUE table 'test.bad'", "MAX_BURST needs MAX_RATE", code=1478)
    expect_error(c, base + "MAX_IN_FLIGHT='many'", "QUEUE table 'test.bad'", "MAX_IN_FLIGHT", code=1478)
    _jobs(server, "MESSAGE_GROUP_COLUMN='k'")
    expect_error(c, "ALTER TABLE test.jobs GROUP_RATE='1/fortnight'", "QUEUE table 'test.jobs'", "GROUP_RATE",
                 code=1478)


def test_a_zero_or_empty_rate_is_refused_naming_the_option(server):
    """'0/s', '0', '0/min', '' read as no limit while '0.000001/s' was refused: a rate is more
    than zero; no limit is the option left out (or DEFAULT)."""
    c = server.connect()
    base = "CREATE TABLE test.bad (id INT, k INT) ENGINE=QUEUE "
    for text in ("0/s", "0", "0/min", "0.0", ""):
        expect_error(c, base + f"MESSAGE_GROUP_COLUMN='k' GROUP_RATE='{text}'", "QUEUE table 'test.bad'",
                     f"GROUP_RATE: '{text}' is", code=1478)
        expect_error(c, base + f"MAX_RATE='{text}'", "QUEUE table 'test.bad'", f"MAX_RATE: '{text}' is", code=1478)
    expect_error(c, base + "MAX_RATE='0/s'", "DEFAULT", code=1478)  # says how to have no limit
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_RATE='5'")
    expect_error(c, "ALTER TABLE test.jobs GROUP_RATE='0/s'", "QUEUE table 'test.jobs'", "GROUP_RATE", code=1478)
    expect_error(c, "ALTER TABLE test.jobs MAX_RATE=''", "QUEUE table 'test.jobs'", "MAX_RATE", code=1478)
    assert "GROUP_RATE`='5'" in server.sql("SHOW CREATE TABLE test.jobs")[0][1]


def test_removing_a_rate_removes_its_burst(server):
    """docs/limits.md: `ALTER TABLE calls GROUP_RATE=DEFAULT` (it failed: GROUP_BURST needs
    GROUP_RATE). The burst only sizes the rate's bucket: it goes with it, in place."""
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=2 GROUP_RATE='10/s' GROUP_BURST=20 "
                  "MAX_RATE='100' MAX_BURST=5 MAX_IN_FLIGHT=7", [(1, "a")])
    data = server.datadir / "test" / "jobs.Q4M"
    inode = os.stat(data).st_ino
    server.sql("ALTER TABLE test.jobs GROUP_RATE=DEFAULT")
    ddl = server.sql("SHOW CREATE TABLE test.jobs")[0][1]
    assert "GROUP_RATE" not in ddl and "GROUP_BURST" not in ddl, ddl
    assert "`MAX_BURST`=5" in ddl and "`GROUP_CONCURRENCY`=2" in ddl, ddl
    server.sql("ALTER TABLE test.jobs MAX_RATE=DEFAULT")
    ddl = server.sql("SHOW CREATE TABLE test.jobs")[0][1]
    assert "MAX_RATE" not in ddl and "MAX_BURST" not in ddl and "`MAX_IN_FLIGHT`=7" in ddl, ddl
    assert os.stat(data).st_ino == inode  # in place: nothing copied
    # A burst given again without its rate is still refused; a rate and a burst come back together.
    c = server.connect()
    expect_error(c, "ALTER TABLE test.jobs GROUP_BURST=3", "GROUP_BURST needs GROUP_RATE", code=1478)
    expect_error(c, "ALTER TABLE test.jobs GROUP_RATE=DEFAULT, GROUP_BURST=3", "GROUP_BURST needs GROUP_RATE",
                 code=1478)
    server.sql("ALTER TABLE test.jobs GROUP_RATE='1/min', GROUP_BURST=3")
    assert "`GROUP_BURST`=3" in server.sql("SHOW CREATE TABLE test.jobs")[0][1]
    # Both at once, and a copying ALTER too.
    server.sql("ALTER TABLE test.jobs ADD COLUMN extra INT, GROUP_RATE=DEFAULT")
    ddl = server.sql("SHOW CREATE TABLE test.jobs")[0][1]
    assert "GROUP_RATE" not in ddl and "GROUP_BURST" not in ddl, ddl
    assert value(c, "SELECT COUNT(*) FROM jobs") == 1


# ---- rates: ceilings only

def _drain_with_stamps(server, consumers, seconds, name="jobs"):
    """Consumers take and end rows for `seconds`; returns [(monotonic time the take returned, key)]
    and the time before the first take was sent."""
    stamps, lock = [], threading.Lock()
    start = time.monotonic()
    stop = start + seconds

    def consume():
        c = server.connect()
        while time.monotonic() < stop:
            got = query(c, f"SELECT k FROM {name} WHERE queue_wait('{name}', 0.2)")
            if got:
                with lock:
                    stamps.append((time.monotonic(), got[0][0]))
        value(c, "SELECT queue_end()")

    ws = [Background(consume) for _ in range(consumers)]
    for w in ws:
        w.join(120)
    return start, stamps


def _check_ceiling(start, stamps, rate, burst):
    """No window [start, t] has more hand-outs than burst + rate * (t - start): a hand-out
    recorded at t happened before t, so the client's clock only adds slack upward."""
    for i, (t, _) in enumerate(sorted(stamps)):
        allowed = burst + rate * (t - start)
        assert i + 1 <= allowed, f"{i + 1} hand-outs by {t - start:.3f}s, bucket allows {allowed:.1f}"


def test_group_rate_never_hands_out_more_than_the_bucket_allows(server):
    rate, burst = 20, 5
    _jobs(server, f"MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=0 GROUP_RATE='{rate}' GROUP_BURST={burst}",
          [(i * 2 + k, f"key{k}") for i in range(200) for k in range(2)])
    start, stamps = _drain_with_stamps(server, 6, 2.5)
    for key in ("key0", "key1"):
        mine = [s for s in stamps if s[1] == key]
        assert mine, f"{key}: no hand-out at all"
        _check_ceiling(start, mine, rate, burst)
    held = server.sql("SELECT WAITING_FOR FROM information_schema.QUEUE_HELD_GROUPS WHERE TABLE_NAME='jobs'")
    assert {r[0] for r in held} <= {"GROUP_RATE"}


def test_max_rate_never_hands_out_more_than_the_bucket_allows(server):
    rate, burst = 30, 3
    _jobs(server, f"MAX_RATE='{rate * 60}/min' MAX_BURST={burst}", [(i, None) for i in range(400)])
    start, stamps = _drain_with_stamps(server, 6, 2.5)
    assert stamps
    _check_ceiling(start, stamps, rate, burst)


def test_a_key_out_of_tokens_does_not_hold_up_others(server):
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=0 GROUP_RATE='1/hour'",
          [(1, "slow"), (2, "slow"), (3, "fast1"), (4, "fast2")])
    c = server.connect()
    got = []
    for _ in range(3):
        got.append(_take(c))
        assert value(c, "SELECT queue_end()") == 1
    assert got == [1, 3, 4]           # slow's 2 waits an hour for its token; the others go
    assert _take(c) is None
    (waiting_for, next_ms), = server.sql("SELECT WAITING_FOR, NEXT_TOKEN_MS FROM "
                                         "information_schema.QUEUE_HELD_GROUPS WHERE TABLE_NAME='jobs'")
    assert waiting_for == "GROUP_RATE" and 0 < next_ms <= 3600 * 1000


# ---- no polling

def test_consumers_waiting_on_limited_keys_use_no_cpu(server):
    """16 consumers sleep in queue_wait() on rows held back by every kind of limit; the
    server's CPU time over 3 s stays near zero (a ceiling far above a sleeping server's and far
    below one polling consumer's)."""
    _jobs(server, "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1 GROUP_RATE='1/hour'",
          [(i, "a") for i in range(1, 51)])
    _jobs(server, "MAX_IN_FLIGHT=1", [(i, None) for i in range(1, 51)], name="t2")
    _jobs(server, "MAX_RATE='1/hour'", [(i, None) for i in range(1, 51)], name="t3")
    owners = [server.connect() for _ in range(3)]  # (a wait on another table would end the row)
    assert _take(owners[0]) == 1
    assert _take(owners[1], name="t2") == 1
    assert _take(owners[2], name="t3") == 1
    waiters = [start_waiter(server, f"SELECT queue_wait('test.{t}', 60)") for t in ("jobs", "t2", "t3") * 5]
    waiters.append(start_waiter(server, "SELECT queue_wait('test.jobs:id>1', 60)"))
    pid = server.proc.pid
    before = _cpu_seconds(pid)
    time.sleep(3)
    used = _cpu_seconds(pid) - before
    assert used < 0.3, f"the server used {used:.2f} s of CPU in 3 s with 16 waiting consumers"
    assert not any(bg.done() for _, bg in waiters)


# ---- kill -9 under load

MAX_IN_FLIGHT_UNDER_LOAD = 2


def _ledger_with_in_flight_check(crash):
    class InFlightLedger(crash.Ledger):
        """The crash test's ledger, which also checks that no more rows are out than
        MAX_IN_FLIGHT: a row counts from its delivery until its queue_end() is sent (ack_unknown)
        or its abort, so the client never sees fewer out than the engine."""
        max_seen = 0

        def deliver(self, mid, who):
            with self.lock:
                out = [m for m in self.held if m != mid and m not in self.ack_unknown]
                if len(out) >= MAX_IN_FLIGHT_UNDER_LOAD:
                    self.violations.append(f"{mid} handed to consumer {who} while {out} are out "
                                           f"(MAX_IN_FLIGHT={MAX_IN_FLIGHT_UNDER_LOAD})")
                InFlightLedger.max_seen = max(InFlightLedger.max_seen, len(out) + 1)
            super().deliver(mid, who)
    return InFlightLedger


@pytest.mark.parametrize("variant", ["group-limits", "table-limits"])
def test_kill9_under_load_with_limits_loses_and_duplicates_nothing(fresh_server, monkeypatch, variant):
    """test_crash.py's producers, consumers, compactor and checks, on a table with limits:
    per group (GROUP_CONCURRENCY=1 and a GROUP_RATE the load reaches: the crash test's ledger
    checks one row of a group out at a time, in order) or for the table (MAX_IN_FLIGHT=2 with
    4 consumers, checked by the ledger, and a MAX_RATE). Each kill -9 loses nothing,
    duplicates nothing, and the limits hold before and after it."""
    import test_crash as crash
    groups = variant == "group-limits"
    monkeypatch.setattr(crash, "Ledger", _ledger_with_in_flight_check(crash) if not groups else crash.Ledger)
    s = fresh_server
    limits = ("MESSAGE_GROUP_COLUMN='grp' GROUP_CONCURRENCY=1 GROUP_RATE='40' GROUP_BURST=2" if groups
              else f"MAX_IN_FLIGHT={MAX_IN_FLIGHT_UNDER_LOAD} MAX_RATE='400' MAX_BURST=5")
    s.sql("CREATE TABLE test.q (producer INT NOT NULL, seq INT NOT NULL, payload TEXT, due TIMESTAMP(3) NULL, "
          f"grp INT) ENGINE=QUEUE VISIBLE_AT_COLUMN='due' {limits}")
    rng = random.Random(f"q4m-limits-crash-{variant}")
    cycles = max(2, crash.CYCLES // 3)
    totals = Counter()
    in_flight_seen = Counter()

    def sample_in_flight(stop):  # the engine's own count, until the kill
        c = s._raw_connect()
        try:
            while not stop.is_set():
                in_flight_seen[json.loads(value(c, "SELECT queue_stats('test.q')"))["in_flight"]] += 1
                time.sleep(0.002)
        except (pymysql.MySQLError, OSError):
            pass  # the server was killed

    for cycle in range(1, cycles + 1):
        stop = threading.Event()
        sampler = threading.Thread(target=sample_in_flight, args=(stop,), daemon=True)
        sampler.start()
        ledger = crash.run_cycle(s, cycle, rng, groups=groups)
        stop.set()
        sampler.join(30)
        s.start()
        # The check drains the rows in SELECT order with one consumer: without the rate (in
        # place), which would make it skip a group out of tokens; then the rate again.
        s.sql("ALTER TABLE test.q " + ("GROUP_RATE=DEFAULT, GROUP_BURST=DEFAULT" if groups
                                       else "MAX_RATE=DEFAULT, MAX_BURST=DEFAULT"))
        totals += crash.check_after_restart(s, ledger, cycle)
        s.sql(f"ALTER TABLE test.q {limits}")
    if groups:
        assert totals["grouped_deliveries"] > 0, "no grouped row was handed out: the cycles tested nothing"
    else:
        assert max(in_flight_seen) == MAX_IN_FLIGHT_UNDER_LOAD, f"limit never reached: {dict(in_flight_seen)}"
    print(f"limits crash test ({variant}): {cycles} cycles, {dict(totals)}, in_flight samples "
          f"{dict(in_flight_seen)}, most out at once by the clients' ledger {getattr(crash.Ledger, 'max_seen', '-')}")
