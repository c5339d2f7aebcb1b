"""Owner mode: queue_wait / queue_end / queue_abort / queue_rowid, visibility, disconnects, races."""
import json
import threading

from sqlcheck import Background, expect_error, query, value, wait_until

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes


def _queue(server, name="q", n=0):
    server.sql(f"CREATE TABLE test.{name} (v INT, s VARCHAR(20)) ENGINE=QUEUE")
    if n:
        server.sql(f"INSERT INTO test.{name} VALUES "
                   + ", ".join(f"({i}, 's{i}')" for i in range(1, n + 1)))


def test_wait_owns_the_first_row_and_end_removes_it(server):
    _queue(server, n=3)
    c = server.connect()
    assert value(c, "SELECT queue_rowid()") is None
    assert value(c, "SELECT queue_wait('test.q', 0)") == 1
    assert query(c, "SELECT v, s FROM test.q") == [(1, "s1")]
    assert value(c, "SELECT queue_rowid()") is not None
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_rowid()") is None
    assert query(c, "SELECT v FROM test.q") == [(2,), (3,)]


def test_abort_returns_the_row(server):
    _queue(server, n=2)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1  # current database is test
    assert value(c, "SELECT queue_abort()") == 1
    assert value(c, "SELECT queue_rowid()") is None
    assert query(c, "SELECT v FROM test.q") == [(1,), (2,)]
    # the returned row is handed out again
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert query(c, "SELECT v FROM test.q") == [(1,)]


def test_wait_again_consumes_the_owned_row(server):
    _queue(server, n=3)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert query(c, "SELECT v FROM q") == [(2,)]
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_wait('q', 0)") == 0  # consumed row 3, nothing left
    assert value(c, "SELECT queue_rowid()") is None
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_timeout_zero_on_empty_table_returns_zero(server):
    _queue(server)
    assert server.value("SELECT queue_wait('q', 0)") == 0
    assert server.value("SELECT queue_rowid()") is None


def test_default_timeout_returns_at_once_when_a_row_exists(server):
    _queue(server, n=1)
    assert server.value("SELECT queue_wait('test.q')") == 1


def test_rows_are_handed_out_in_insert_order(server):
    _queue(server, n=50)
    c = server.connect()
    got = []
    while value(c, "SELECT queue_wait('q', 0)") == 1:
        got.append(value(c, "SELECT v FROM q"))
    assert got == list(range(1, 51))


def test_one_statement_consume_loop_takes_each_row_once(server):
    _queue(server, n=20)
    c = server.connect()
    got = []
    while True:
        rows = query(c, "SELECT v, s FROM test.q WHERE queue_wait('test.q', 0)")
        if not rows:
            break
        assert len(rows) == 1, rows
        got.append(rows[0])
    assert got == [(i, f"s{i}") for i in range(1, 21)]
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_owned_row_is_invisible_to_others_and_owner_sees_only_it(server):
    _queue(server, n=3)
    _queue(server, name="other", n=2)
    server.sql("CREATE TABLE test.plain (v INT) ENGINE=InnoDB")
    server.sql("INSERT INTO test.plain VALUES (7)")
    owner, other = server.connect(), server.connect()
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    assert query(owner, "SELECT v FROM q") == [(1,)]
    assert query(owner, "SELECT v FROM q WHERE v > 1") == []
    assert query(owner, "SELECT v FROM other") == []  # other queue tables look empty
    assert value(owner, "SELECT COUNT(*) FROM other") == 0
    assert query(owner, "SELECT v FROM plain") == [(7,)]  # non-queue tables unaffected
    assert query(other, "SELECT v FROM q") == [(2,), (3,)]
    assert query(other, "SELECT v FROM other") == [(1,), (2,)]
    assert value(owner, "SELECT queue_end()") == 1
    assert query(owner, "SELECT v FROM other") == [(1,), (2,)]


def test_two_owners_get_different_rows(server):
    _queue(server, n=3)
    a, b = server.connect(), server.connect()
    assert value(a, "SELECT queue_wait('q', 0)") == 1
    assert value(b, "SELECT queue_wait('q', 0)") == 1
    assert query(a, "SELECT v FROM q") == [(1,)]
    assert query(b, "SELECT v FROM q") == [(2,)]
    assert value(a, "SELECT queue_rowid()") != value(b, "SELECT queue_rowid()")


def test_wait_returns_the_index_of_the_supplying_table(server):
    _queue(server, name="q1")
    _queue(server, name="q2", n=1)
    c = server.connect()
    assert value(c, "SELECT queue_wait('q1', 'test.q2', 0)") == 2
    assert query(c, "SELECT v FROM q2") == [(1,)]
    assert value(c, "SELECT queue_end()") == 1
    server.sql("INSERT INTO test.q1 VALUES (10, 'a')")
    server.sql("INSERT INTO test.q2 VALUES (20, 'b')")
    # list order is priority
    assert value(c, "SELECT queue_wait('q1', 'q2', 0)") == 1
    assert query(c, "SELECT v FROM q1") == [(10,)]
    assert value(c, "SELECT queue_wait('q2', 'q1', 0)") == 1  # consumes q1's row, takes q2's
    assert query(c, "SELECT v FROM q2") == [(20,)]
    assert value(c, "SELECT queue_wait('q1', 'q2', 0)") == 0


def test_two_string_arguments_are_two_tables(server):
    # the original treated 'b' as the timeout
    _queue(server, name="a")
    _queue(server, name="b", n=1)
    assert server.value("SELECT queue_wait('a', 'b')") == 2


def test_table_in_another_database(server):
    server.sql("CREATE DATABASE other")
    server.sql("CREATE TABLE other.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO other.q VALUES (5)")
    c = server.connect()
    assert value(c, "SELECT queue_wait('other.q', 0)") == 1
    assert query(c, "SELECT v FROM other.q") == [(5,)]
    assert value(c, "SELECT queue_end()") == 1


def test_rowid_is_stable_and_increasing(server):
    _queue(server, n=3)
    c = server.connect()
    ids = []
    for _ in range(3):
        assert value(c, "SELECT queue_wait('q', 0)") == 1
        rid = value(c, "SELECT queue_rowid()")
        assert value(c, "SELECT queue_rowid()") == rid
        ids.append(rid)
        assert value(c, "SELECT queue_abort()") == 1
        # the same row comes back with the same id
        assert value(c, "SELECT queue_wait('q', 0)") == 1
        assert value(c, "SELECT queue_rowid()") == rid
        assert value(c, "SELECT queue_end()") == 1
    assert all(i > 0 for i in ids) and ids == sorted(ids) and len(set(ids)) == 3
    server.sql("INSERT INTO test.q VALUES (9, 'later')")
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_rowid()") > ids[-1]


def test_close_returns_the_owned_row(server):
    _queue(server, n=1)
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    owner.close()
    other = server.connect()
    assert value(other, "SELECT queue_wait('q', 30)") == 1
    assert query(other, "SELECT v FROM q") == [(1,)]


def test_killed_connection_returns_the_owned_row(server):
    _queue(server, n=1)
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('q', 0)") == 1
    server.sql(f"KILL {owner.thread_id()}")
    other = server.connect()
    assert value(other, "SELECT queue_wait('q', 30)") == 1
    assert query(other, "SELECT v FROM q") == [(1,)]


def test_racing_consumers_never_share_a_row(server):
    n_rows, n_threads = 2000, 6
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    for start in range(0, n_rows, 500):
        server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i})" for i in range(start, start + 500)))
    got = [[] for _ in range(n_threads)]
    barrier = threading.Barrier(n_threads)

    def consume(k):
        c = server.connect()
        barrier.wait()
        while True:
            if k % 2:  # one-statement style
                rows = query(c, "SELECT v FROM q WHERE queue_wait('q', 0)")
                if not rows:
                    return
                assert len(rows) == 1
                got[k].append(rows[0][0])
            else:  # wait / read / end style
                if value(c, "SELECT queue_wait('q', 0)") == 0:
                    return
                rows = query(c, "SELECT v FROM q")
                assert len(rows) == 1
                got[k].append(rows[0][0])
                assert value(c, "SELECT queue_end()") == 1

    workers = [Background(consume, k) for k in range(n_threads)]
    for w in workers:
        w.join(300)
    everything = sorted(v for g in got for v in g)
    assert everything == list(range(n_rows))
    for g in got:
        assert g == sorted(g), "a single consumer must see rows in insert order"
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_racing_consumers_and_producers(server):
    server.sql("CREATE TABLE test.q (p INT, seq INT) ENGINE=QUEUE")
    n_prod, n_cons, per_prod = 3, 3, 300
    got = [[] for _ in range(n_cons)]
    producers_done = threading.Event()

    def produce(p):
        c = server.connect()
        for i in range(per_prod):
            query(c, "INSERT INTO q VALUES (%s, %s)", (p, i))

    def consume(k):
        c = server.connect()
        while True:
            r = value(c, "SELECT queue_wait('q', 0.2)")
            if r == 0:
                if producers_done.is_set() and value(c, "SELECT COUNT(*) FROM q") == 0:
                    return
                continue
            rows = query(c, "SELECT p, seq FROM q")
            assert len(rows) == 1
            got[k].append(rows[0])
            assert value(c, "SELECT queue_end()") == 1

    consumers = [Background(consume, k) for k in range(n_cons)]
    producers = [Background(produce, p) for p in range(n_prod)]
    for p in producers:
        p.join(300)
    producers_done.set()
    for c in consumers:
        c.join(300)
    everything = sorted(x for g in got for x in g)
    assert everything == sorted((p, i) for p in range(n_prod) for i in range(per_prod))


def test_delivery_count_and_a_dead_letter_table(server):
    """queue_delivery_count(): how often the owned row has been handed out (abort, disconnect and
    an expired lease all hand it out again); enough to move a poison message aside in SQL."""
    _queue(server, n=1)
    server.sql("CREATE TABLE test.dead (v INT, s VARCHAR(20), deliveries INT) ENGINE=QUEUE")
    a = server.connect()
    assert value(a, "SELECT queue_delivery_count()") is None  # not in owner mode
    assert query(a, "SELECT v, queue_delivery_count() FROM q WHERE queue_wait('q', 0)") == [(1, 1)]
    assert value(a, "SELECT queue_abort()") == 1
    b = server.connect()
    assert query(b, "SELECT v, queue_delivery_count() FROM q WHERE queue_wait('q', 0)") == [(1, 2)]
    b.close()  # the consumer died
    c = server.connect()
    query(c, "SET SESSION queue_lease_timeout = 0.05")
    assert query(c, "SELECT queue_delivery_count() FROM q WHERE queue_wait('q', 0)") == [(3,)]
    wait_until(lambda: json.loads(server.value("SELECT queue_stats('test.q')"))["lease_expiries"] == 1,
               what="the lease to run out")  # the consumer hung
    expect_error(c, "SELECT * FROM q WHERE queue_wait('q', 0)", "lease expired")
    query(c, "SET SESSION queue_lease_timeout = 0")
    assert query(c, "SELECT v, queue_delivery_count() FROM q WHERE queue_wait('q', 0)") == [(1, 4)]
    # Too many tries: park it in the dead-letter table, then remove it from the queue.
    query(c, "INSERT INTO test.dead SELECT v, s, queue_delivery_count() FROM q")
    assert value(c, "SELECT queue_end()") == 1
    assert server.sql("SELECT v, s, deliveries FROM test.dead") == [(1, "s1", 4)]
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    expect_error(c, "SELECT queue_delivery_count(1)", "queue_delivery_count() takes no arguments")
