"""queue_abort(delay): give the owned row(s) back, to be handed out again only after `delay`
seconds (a retry backoff, like SQS's ChangeMessageVisibility before giving a message up, or
Redis's XNACK with a delay). Until then the row is queued: counted, visible, deletable."""
import json
import time

import pytest

from sqlcheck import expect_error, query, value, wait_until

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes

ER_WRONG_ARGUMENTS = 1210


def _queue(server, n):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))


def _status(server):
    return {name: int(v) for _, name, v in server.sql("SHOW ENGINE QUEUE STATUS")}


def _delayed(server):
    i_s = server.value("SELECT DELAYED_ROWS FROM information_schema.QUEUE_TABLES "
                       "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='q'")
    stats = json.loads(server.value("SELECT queue_stats('test.q')"))["delayed_rows"]
    assert i_s == stats, (i_s, stats)
    return stats


def test_a_delayed_row_is_held_back_then_delivered_again(server):
    _queue(server, 2)
    a, b, c = server.connect(), server.connect(), server.connect()
    assert query(a, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    rowid = value(a, "SELECT queue_rowid()")
    aborted_at = time.monotonic()
    assert value(a, "SELECT queue_abort(2)") == 1
    expect_error(a, "SELECT queue_end()", "does not own a row")  # owner mode was left
    assert _delayed(server) == 1

    assert query(b, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]  # not held up by it
    assert value(b, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('q', 0)") == 0  # not handed out yet...
    assert value(c, "SELECT queue_end()") == 1          # (owner mode owning no row, as Q4M: left)
    assert value(c, "SELECT COUNT(*) FROM q") == 1      # ...but queued
    assert query(c, "SELECT v FROM q") == [(1,)]

    assert query(c, "SELECT v FROM q WHERE queue_wait('q', 60)") == [(1,)]
    assert time.monotonic() - aborted_at >= 2
    assert value(c, "SELECT queue_rowid()") == rowid
    assert value(c, "SELECT queue_delivery_count()") == 2
    assert _delayed(server) == 0
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT COUNT(*) FROM q") == 0


def test_no_delay_and_zero_return_the_row_at_once(server):
    _queue(server, 1)
    a, b = server.connect(), server.connect()
    for call in ["queue_abort()", "queue_abort(0)", "queue_abort('0')"]:
        assert value(a, "SELECT queue_wait('q', 0)") == 1
        assert value(a, f"SELECT {call}") == 1
        assert _delayed(server) == 0
        assert value(b, "SELECT queue_wait('q', 0)") == 1
        assert value(b, "SELECT queue_abort()") == 1


def test_exponential_backoff_from_the_delivery_count(server):
    """The docs' recipe: the delay argument may use queue_delivery_count() of the owned row."""
    _queue(server, 1)
    a = server.connect()
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(a, "SELECT queue_abort(LEAST(POW(2, queue_delivery_count()), 3600) / 4)") == 1  # 0.5 s
    assert value(a, "SELECT queue_wait('q', 0)") == 0
    assert value(a, "SELECT queue_wait('q', 60)") == 1
    assert value(a, "SELECT queue_delivery_count()") == 2
    assert value(a, "SELECT queue_abort(LEAST(POW(2, queue_delivery_count()), 3600) / 4)") == 1  # 1 s
    assert _delayed(server) == 1
    assert value(a, "SELECT queue_wait('q', 60)") == 1
    assert value(a, "SELECT queue_delivery_count()") == 3
    assert value(a, "SELECT queue_end()") == 1


def test_a_batch_is_delayed_whole(server):
    _queue(server, 3)
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait_batch('test.q', 3, 0)") == 3
    assert value(a, "SELECT queue_abort(1.5)") == 1
    assert _delayed(server) == 3
    assert value(b, "SELECT queue_wait('q', 0)") == 0
    got = []
    while len(got) < 3:
        rows = query(b, "SELECT v FROM q WHERE queue_wait('q', 60)")
        assert rows, got
        got += [r[0] for r in rows]
    assert got == [1, 2, 3]
    assert value(b, "SELECT queue_end()") == 1


def test_a_delayed_row_can_be_deleted(server):
    _queue(server, 2)
    a, b = server.connect(), server.connect()
    assert query(a, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    assert value(a, "SELECT queue_abort(1)") == 1
    with b.cursor() as cur:
        assert cur.execute("DELETE FROM q WHERE v = 1") == 1
    assert _delayed(server) == 0
    time.sleep(1.5)  # its deadline passes: nothing comes back
    assert query(b, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]
    assert value(b, "SELECT queue_end()") == 1
    assert value(b, "SELECT queue_wait('q', 0)") == 0


def test_bad_delays_are_refused_and_the_row_stays_owned(server):
    _queue(server, 1)
    a = server.connect()
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    for bad, shown in [("-1", "-1"), ("NULL", "NULL"), ("'soon'", "soon")]:
        code, msg = expect_error(a, f"SELECT queue_abort({bad})", "queue_abort(): argument 1: invalid delay")
        assert code == ER_WRONG_ARGUMENTS, (code, msg)
        assert shown in msg, msg
    code, msg = expect_error(a, "SELECT queue_abort(1, 2)", "queue_abort() takes 0 or 1 argument")
    assert code == 1582, (code, msg)
    assert value(a, "SELECT queue_end()") == 1  # still the owner: nothing was returned
    assert value(a, "SELECT COUNT(*) FROM q") == 0


RESTARTS = [("fdatasync", True), ("fdatasync", False), ("none", True)]


@pytest.mark.parametrize("mode, kill", RESTARTS, ids=[f"{m}-{'kill9' if k else 'clean'}" for m, k in RESTARTS])
def test_delays_and_delivery_counts_survive_a_restart(server, mode, kill):
    """A row given back keeps its retry delay and its delivery count across a clean restart
    and a kill -9 (a RETURN record in the data file). A delivery cut short by a crash is not
    counted; a clean shutdown disconnects its consumer, which ends (and counts) it."""
    server.sql(f"SET GLOBAL queue_sync_mode = '{mode}'")
    _queue(server, 4)
    recorded_before = _status(server)["returns_recorded"]
    a = server.connect()
    assert query(a, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    assert value(a, "SELECT queue_abort(3600)") == 1          # row 1: back in an hour
    for _ in range(2):                                          # row 2: given back twice...
        assert query(a, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]
        assert value(a, "SELECT queue_abort()") == 1
    holders = [server.connect() for _ in range(3)]
    assert query(holders[0], "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]  # ...then held
    gone = server.connect()                                     # row 3: its consumer disconnects...
    assert query(gone, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(3,)]
    gone.close()
    wait_until(lambda: server.value("SELECT OWNED_ROWS FROM information_schema.QUEUE_TABLES "
                                    "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='q'") == 1,
               what="the disconnected consumer's row to go back")
    assert query(holders[1], "SELECT v FROM q WHERE queue_wait('q', 0)") == [(3,)]  # ...then held
    assert query(holders[2], "SELECT v FROM q WHERE queue_wait('q', 0)") == [(4,)]  # row 4: held
    assert value(holders[0], "SELECT queue_delivery_count()") == 3
    assert value(holders[1], "SELECT queue_delivery_count()") == 2
    assert value(holders[2], "SELECT queue_delivery_count()") == 1
    assert _status(server)["returns_recorded"] - recorded_before == 4  # three aborts, one disconnect

    server.restart(kill=kill)
    assert _delayed(server) == 1
    b = server.connect()
    cut_short = 0 if kill else 1  # the holders' deliveries: cut by the crash / ended by shutdown
    for v, ended_before in [(2, 2), (3, 1), (4, 0)]:
        assert query(b, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(v,)]
        assert value(b, "SELECT queue_delivery_count()") == ended_before + cut_short + 1, v
        assert value(b, "SELECT queue_end()") == 1
    assert value(b, "SELECT queue_wait('q', 0)") == 0       # row 1 is still held back
    assert value(b, "SELECT queue_end()") == 1              # (owner mode owning no row, as Q4M: left)
    assert query(b, "SELECT v FROM q") == [(1,)]
    assert value(b, "SELECT COUNT(*) FROM q") == 1


def test_a_delay_that_ends_after_a_restart_delivers_with_its_count(server):
    _queue(server, 1)
    a = server.connect()
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(a, "SELECT queue_abort()") == 1
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(a, "SELECT queue_abort(3)") == 1
    aborted_at = time.time()
    server.restart(kill=True)
    b = server.connect()
    assert value(b, "SELECT queue_wait('q', 0)") == 0 or time.time() - aborted_at >= 3
    assert query(b, "SELECT v FROM q WHERE queue_wait('q', 30)") == [(1,)]
    assert time.time() - aborted_at >= 3 - 0.05
    assert value(b, "SELECT queue_delivery_count()") == 3
    assert value(b, "SELECT queue_end()") == 1
