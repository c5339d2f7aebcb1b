"""Two-phase commit across a crash (docs/transactions.md): a transaction that writes InnoDB rows
and a QUEUE table, killed at each point of its commit, is afterwards wholly there or wholly
gone, and committed once the coordinator decided (before_commit, after_commit). With the binary
log on, the binlog coordinates. With it off the server's tc.log does, and MariaDB 10.11.18's own
tc.log recovery rolls back every prepared transaction, the ones it logged as committed too
(sql/log.cc TC_LOG_MMAP::recover passes no mem_root, so sql/handler.cc xarecover_handlerton calls
rollback_by_xid for all), while InnoDB leaves its commit record unsynced for that coordinator:
QUEUE reads tc.log at its init and commits what it logged, in every engine
(engine/tc_log_recovery.h). The server kills itself at the point (queue_debug_crash_point,
SIGKILL as kill -9)."""
import pytest

from q4m_server import ServerDied
from sqlcheck import expect_error, query, value

# MariaDB 10.11.18's InnoDB, committing a recovered prepared transaction after kill -9, can stop
# on this assertion and never start again; it happens with InnoDB alone
# (tools/repro/innodb_xa_recovery_crash.py, docs/transactions.md "A defect of MariaDB's").
INNODB_XA_RECOVERY_DEFECT = "trx0purge.cc line 277"

POINTS = ["before_prepare", "after_prepare", "before_commit", "after_commit"]
BINLOG = {"binlog": ["--log-bin=mysql-bin", "--binlog-format=ROW", "--server-id=1"], "no-binlog": ["--skip-log-bin"]}


def _server(server_factory, binlog):
    # The crash point is a test hook: only a server started with it enabled takes one.
    s = server_factory.new(extra_args=BINLOG[binlog] + ["--queue-debug-hooks=ON"], at_startup=True)
    s.sql("CREATE TABLE test.q (id INT) ENGINE=QUEUE")
    s.sql("CREATE TABLE test.orders (id INT PRIMARY KEY) ENGINE=InnoDB")
    s.sql("CREATE TABLE test.results (id INT PRIMARY KEY) ENGINE=InnoDB")
    return s


def _commit_and_die(s, c):
    try:
        query(c, "COMMIT")
    except Exception:  # noqa: BLE001 - the server is gone: that is the point
        pass
    s.kill9()  # reaps it (it killed itself at the point, or is killed now)
    s.start()


# (binlog, point) pairs kept whole: all of them, in both configurations. before_commit_record:
# the coordinator has the transaction (synced), QUEUE's commit record is not written (it waits for
# no sync of its own with the binary log: the binlog's recovery commits the part; with tc.log,
# QUEUE's tc.log recovery does).
WHOLE = [(b, p) for b in ("binlog", "no-binlog") for p in POINTS + ["before_commit_record"]]


@pytest.mark.parametrize("binlog,point", WHOLE)
def test_an_outbox_transaction_killed_at_any_point_is_all_or_nothing(server_factory, point, binlog):
    s = _server(server_factory, binlog)
    try:
        c = s.connect()
        query(c, f"SET GLOBAL queue_debug_crash_point = '{point}'")
        query(c, "BEGIN")
        query(c, "INSERT INTO orders VALUES (1)")
        query(c, "INSERT INTO q VALUES (1)")
        _commit_and_die(s, c)
        orders = s.value("SELECT COUNT(*) FROM test.orders")
        queued = s.value("SELECT COUNT(*) FROM test.q")
        assert (orders, queued) in [(0, 0), (1, 1)], f"{point}/{binlog}: orders {orders}, queue rows {queued}"
        if point in ("before_prepare",):
            assert orders == 0
        if point in ("before_commit_record", "before_commit", "after_commit"):  # the coordinator has it
            assert orders == 1, f"{point}/{binlog}: a decided transaction was rolled back"
        # Nothing is left prepared, and the table works on.
        assert s.sql("XA RECOVER") == []
        s.sql("INSERT INTO test.q VALUES (2)")
        assert s.value("SELECT COUNT(*) FROM test.q") == queued + 1
    finally:
        s.destroy()


@pytest.mark.parametrize("binlog,point", WHOLE)
def test_a_consume_transaction_killed_at_any_point_is_all_or_nothing(server_factory, point, binlog):
    s = _server(server_factory, binlog)
    try:
        s.sql("INSERT INTO test.q VALUES (7)")
        c = s.connect()
        query(c, f"SET GLOBAL queue_debug_crash_point = '{point}'")
        query(c, "BEGIN")
        assert value(c, "SELECT queue_wait('q', 0)") == 1
        query(c, "INSERT INTO results SELECT id FROM q")
        assert value(c, "SELECT queue_end()") == 1
        _commit_and_die(s, c)
        results = s.value("SELECT COUNT(*) FROM test.results")
        queued = s.value("SELECT COUNT(*) FROM test.q")
        assert (results, queued) in [(0, 1), (1, 0)], f"{point}/{binlog}: results {results}, queue rows {queued}"
        if point in ("before_commit_record", "before_commit", "after_commit"):
            assert results == 1, f"{point}/{binlog}: a decided transaction was rolled back"
        assert s.sql("XA RECOVER") == []
    finally:
        s.destroy()


def test_with_the_binlog_an_autocommit_change_killed_before_its_commit_record_is_committed(server_factory):
    """With the binary log on, QUEUE's commit record waits for no sync (the binlog keeps the
    transaction until QUEUE's commit_checkpoint_request answer). Killed after the binlog has an
    autocommit INSERT and before QUEUE wrote its commit record, the restart commits it from the
    binlog: the row is there under the id it would have had; killed there in a consuming
    statement, the row is gone."""
    s = _server(server_factory, "binlog")
    try:
        s.sql("INSERT INTO test.q VALUES (1), (2)")
        c = s.connect()
        query(c, "SET GLOBAL queue_debug_crash_point = 'before_commit_record'")
        _run_and_die(s, c, "INSERT INTO q VALUES (3)")
        assert s.sql("XA RECOVER") == []
        assert sorted(s.sql("SELECT id FROM test.q")) == [(1,), (2,), (3,)]
        owners = [s.connect() for _ in range(3)]  # one row each: a second wait would end the first
        for c in owners:
            assert value(c, "SELECT queue_wait('q', 0)") == 1
        taken = [(value(c, "SELECT id FROM q"), value(c, "SELECT queue_rowid()")) for c in owners]
        assert taken == [(1, 1), (2, 2), (3, 3)]  # the recovered row got the id it was logged with
        query(owners[2], "SET GLOBAL queue_debug_crash_point = 'before_commit_record'")
        _run_and_die(s, owners[2], "SELECT queue_end()")  # row 3's end is logged, its record not written
        assert s.sql("XA RECOVER") == []
        assert sorted(s.sql("SELECT id FROM test.q")) == [(1,), (2,)]  # 1 and 2 back: their owners went
        s.sql("INSERT INTO test.q VALUES (4)")
        owners = [s.connect() for _ in range(3)]
        for c in owners:
            assert value(c, "SELECT queue_wait('q', 0)") == 1
        assert [(value(c, "SELECT id FROM q"), value(c, "SELECT queue_rowid()")) for c in owners] == [
            (1, 1), (2, 2), (4, 4)]  # ids never go back
    finally:
        s.destroy()


def _run_and_die(s, c, statement):
    try:
        query(c, statement)
    except Exception:  # noqa: BLE001 - the server is gone: that is the point
        pass
    s.kill9()
    s.start()


def test_without_the_binlog_a_transaction_committed_then_killed_keeps_both_halves(server_factory):
    """With the binary log off InnoDB leaves its commit record unsynced for MariaDB's tc.log,
    whose own recovery commits nothing: a kill -9 right after COMMIT returned lost the InnoDB half
    (3 of 3 before). QUEUE commits what tc.log logged at its init: both halves stay, and no
    engine's log is synced at the commit for it."""
    s = _server(server_factory, "no-binlog")
    try:
        for i in range(1, 4):
            c = s.connect()
            query(c, "BEGIN")
            query(c, f"INSERT INTO orders VALUES ({i})")
            query(c, f"INSERT INTO q VALUES ({i})")
            query(c, "COMMIT")
            s.kill9()
            s.start()
            assert s.sql("SELECT id FROM test.orders") == [(k,) for k in range(1, i + 1)], i
            assert sorted(s.sql("SELECT id FROM test.q")) == [(k,) for k in range(1, i + 1)], i
    finally:
        s.destroy()


def test_outbox_and_consume_transactions_under_load_survive_repeated_kills(server_factory):
    """Producers commit an order and its job together; consumers take a job, write its result
    and end the job together. kill -9 in the middle, 20 times: every order has its job still
    queued or its result written, never both, never neither; nothing acknowledged is lost."""
    import itertools
    import os
    import random
    import threading

    import pymysql

    cycles = int(os.environ.get("Q4M_TXN_CRASH_CYCLES", "20"))
    rng = random.Random(int(os.environ.get("Q4M_TXN_CRASH_SEED", "28")))
    s = _server(server_factory, "binlog")
    acked_orders, acked_results = set(), set()
    totals = [0, 0]  # acknowledged on servers replaced after InnoDB's defect
    innodb_defects = 0
    lock = threading.Lock()
    ids = itertools.count(1)  # next() on it is atomic under the GIL
    try:
        for cycle in range(cycles):
            def produce(stop):
                try:
                    c = s.connect()
                    while not stop.is_set():
                        oid = next(ids)
                        query(c, "BEGIN")
                        query(c, "INSERT INTO orders VALUES (%s)", (oid,))
                        query(c, "INSERT INTO q VALUES (%s)", (oid,))
                        query(c, "COMMIT")
                        with lock:
                            acked_orders.add(oid)
                except (pymysql.MySQLError, AttributeError, OSError):
                    pass  # the server went away (PyMySQL drops the socket object under a reader)

            def consume(stop):
                try:
                    c = s.connect()
                    while not stop.is_set():
                        query(c, "BEGIN")
                        if value(c, "SELECT queue_wait('q', 0.2)") != 1:
                            value(c, "SELECT queue_end()")
                            query(c, "ROLLBACK")
                            continue
                        job = value(c, "SELECT id FROM q")
                        query(c, "INSERT INTO results VALUES (%s)", (job,))
                        assert value(c, "SELECT queue_end()") == 1
                        query(c, "COMMIT")
                        with lock:
                            acked_results.add(job)
                except (pymysql.MySQLError, AttributeError, OSError):
                    pass

            s.kill9_under_load([produce, produce, consume, consume], rng.uniform(0.2, 0.8))
            try:
                s.start()
            except ServerDied as e:
                if INNODB_XA_RECOVERY_DEFECT not in str(e):
                    raise
                # MariaDB's own defect (tools/repro/innodb_xa_recovery_crash.py shows it with
                # InnoDB alone): this datadir cannot start again. Go on with a new server.
                print(f"cycle {cycle}: InnoDB's recovery defect; a new server takes over")
                innodb_defects += 1
                s.destroy()
                s = _server(server_factory, "binlog")
                totals[0] += len(acked_orders)
                totals[1] += len(acked_results)
                acked_orders.clear()
                acked_results.clear()
                continue
            orders = {r[0] for r in s.sql("SELECT id FROM test.orders")}
            queued = [r[0] for r in s.sql("SELECT id FROM test.q")]
            results = {r[0] for r in s.sql("SELECT id FROM test.results")}
            assert len(queued) == len(set(queued)), f"cycle {cycle}: a job queued twice"
            assert not set(queued) & results, f"cycle {cycle}: jobs both queued and done: {set(queued) & results}"
            assert orders == set(queued) | results, (
                f"cycle {cycle}: orders without a job or result: {sorted(orders - set(queued) - results)[:10]}, "
                f"jobs or results without an order: {sorted((set(queued) | results) - orders)[:10]}")
            assert acked_orders <= orders, f"cycle {cycle}: acknowledged orders lost: {sorted(acked_orders - orders)[:10]}"
            assert acked_results <= results, f"cycle {cycle}: acknowledged results lost"
            assert s.sql("XA RECOVER") == []
        orders_acked, results_acked = totals[0] + len(acked_orders), totals[1] + len(acked_results)
        print(f"{cycles} kills: {orders_acked} orders and {results_acked} results acknowledged; "
              f"InnoDB's recovery defect met {innodb_defects} times")
        assert orders_acked > 100 and results_acked > 50, (orders_acked, results_acked)
        assert innodb_defects < cycles // 2, "the kill loop hardly ran: InnoDB failed to restart in most cycles"
    finally:
        s.destroy()


def test_the_crash_point_is_inert_on_a_server_started_without_debug_hooks(server):
    """A production server (no --queue-debug-hooks=ON, the default) refuses to arm the hook
    that kills it; the hook stays settable to its default, and the switch is read-only."""
    c = server.connect()
    assert value(c, "SELECT @@GLOBAL.queue_debug_hooks") == 0
    for point in POINTS:
        expect_error(c, f"SET GLOBAL queue_debug_crash_point = '{point}'", "queue_debug_crash_point is a test hook",
                     "--queue-debug-hooks=ON", code=1231)
    query(c, "SET GLOBAL queue_debug_crash_point = 'none'")
    expect_error(c, "SET GLOBAL queue_debug_crash_point = 'nowhere'", code=1231)
    expect_error(c, "SET GLOBAL queue_debug_hooks = ON", "read only", code=1238)
    assert value(c, "SELECT @@GLOBAL.queue_debug_crash_point") == "none"
