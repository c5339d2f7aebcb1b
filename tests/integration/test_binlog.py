"""QUEUE tables on a server with the binary log on: inserted rows are logged as rows (ROW and
MIXED format; STATEMENT is refused, as for sequences: a statement like DELETE ... LIMIT 1 could
pick other rows on a replica), DDL as statements, without "unsafe statement" warnings; a removal
(queue_end, the end inside queue_wait, DELETE) as a statement queue_apply_removal() naming the
rows by id, in its transaction; taking a row and queue_abort() log nothing.
docs/replication.md states this contract."""
import re
import time

import pymysql
import pytest

from sqlcheck import WAITING_FOR_ROW, Background, query, wait_until

ER_BINLOG_STMT_MODE_AND_ROW_ENGINE = 1665


def binlog_position(cur):
    cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    return row[0], row[1]


def redo_applies(s):
    """queue_binlog_redo is on and the binary log synced at every group commit (sync_binlog=1):
    a QUEUE prepare then writes its redo into the transaction (a queue_apply_redo statement) and
    syncs nothing (docs/recovery.md, "The prepare redone from the binary log")."""
    return s.value("SELECT @@global.queue_binlog_redo = 1 AND @@global.sync_binlog = 1") == 1


def without_redo(events):
    """The events but the prepares' redo statements."""
    return [(t, info) for t, info in events if not (t == "Query" and "queue_apply_redo(" in info)]


def binlog_events(cur, since):
    """(event type, info) of every event after position `since` (file, pos)."""
    cur.execute(f"SHOW BINLOG EVENTS IN '{since[0]}' FROM {since[1]}")
    return [(r[2], r[5]) for r in cur.fetchall()]


@pytest.fixture(scope="module", params=["ROW", "MIXED"])
def binlog_server(request, server_factory):
    s = server_factory.new(extra_args=["--log-bin=q4m-bin", "--server-id=1",
                                       f"--binlog-format={request.param}"])
    s.binlog_format = request.param
    yield s
    s.destroy()


def test_dml_and_ddl_are_logged_without_warnings(binlog_server):
    s = binlog_server
    cur = s.connect().cursor()
    cur.execute("DROP TABLE IF EXISTS bq")
    start = binlog_position(cur)
    cur.execute("CREATE TABLE bq (id INT NOT NULL, body VARCHAR(20)) ENGINE=QUEUE")
    for statement in ("INSERT INTO bq VALUES (1,'a'),(2,'b'),(3,'c')",
                      "INSERT INTO bq SELECT id + 10, body FROM bq",
                      "DELETE FROM bq WHERE id = 12",
                      "ALTER TABLE bq ADD COLUMN extra INT",
                      "TRUNCATE TABLE bq",
                      "INSERT INTO bq (id) VALUES (7)"):
        cur.execute(statement)
        cur.execute("SHOW WARNINGS")
        assert cur.fetchall() == (), f"{s.binlog_format}: {statement}"
    events = binlog_events(cur, start)
    text = "\n".join(f"{t} {info}" for t, info in events)
    assert "CREATE TABLE bq" in text and "ALTER TABLE bq" in text and "TRUNCATE TABLE bq" in text, text
    # Rows in both formats (MIXED too: the engine logs rows only).
    assert [t for t, _ in events].count("Write_rows_v1") == 3, text
    # A DELETE is logged as the removal of rows by id (a replica finds them by id, not by bytes).
    assert [t for t, _ in events].count("Delete_rows_v1") == 0, text
    assert removals_logged(events, "bq") == [[(5, 8)]], text  # id 12 is the fifth row
    statements = [info for t, info in events if t == "Query"]
    assert not [q for q in statements if "INSERT INTO bq" in q or "DELETE FROM bq" in q], text


def removals_logged(events, table="cq"):
    """The (row id, length) lists of the queue_apply_removal statements of `table` among `events`."""
    found = []
    for t, info in events:
        m = re.search(r"SET @queue_removed = queue_apply_removal\('test','" + table + r"','([0-9:,]*)'\)", info)
        if t == "Query" and m:
            found.append([tuple(int(x) for x in row.split(":")[:2]) for row in m.group(1).split(",")])
    return found


def test_consuming_logs_each_removal_and_nothing_else(binlog_server):
    s = binlog_server
    cur = s.connect().cursor()
    cur.execute("DROP TABLE IF EXISTS cq")
    cur.execute("CREATE TABLE cq (id INT NOT NULL) ENGINE=QUEUE")
    cur.execute("INSERT INTO cq VALUES (1),(2),(3),(4),(5)")
    before = binlog_position(cur)
    cur.execute("SELECT id FROM cq WHERE queue_wait('cq', 1)")
    assert cur.fetchall() == ((1,),)
    assert binlog_position(cur) == before, binlog_events(cur, before)  # taking a row logs nothing
    cur.execute("SELECT id FROM cq WHERE queue_wait('cq', 1)")  # ends row 1, takes row 2
    assert cur.fetchall() == ((2,),)
    cur.execute("SELECT queue_abort()")
    cur.execute("SELECT id FROM cq WHERE queue_wait('cq', 1)")
    assert cur.fetchall() == ((2,),)
    cur.execute("SELECT queue_end()")
    cur.execute("SELECT queue_wait_batch('cq', 2, 1)")
    cur.execute("SELECT queue_end()")
    events = binlog_events(cur, before)
    # One statement per removal, each in its own transaction (a row of one INT: 6 bytes).
    assert removals_logged(events) == [[(1, 6)], [(2, 6)], [(3, 6), (4, 6)]], events
    assert [t for t, _ in events].count("Xid") == 3, events
    assert [t for t, _ in events if t not in ("Gtid", "Query", "Xid")] == [], events
    cur.execute("SELECT id FROM cq")
    assert cur.fetchall() == ((5,),)


def test_statement_format_is_refused_for_queue_rows_not_for_ddl_or_consuming(server_factory):
    s = server_factory.new(extra_args=["--log-bin=q4m-bin", "--server-id=1", "--binlog-format=STATEMENT"])
    try:
        cur = s.connect().cursor()
        cur.execute("CREATE TABLE sq (id INT NOT NULL) ENGINE=QUEUE")
        for statement in ("INSERT INTO sq VALUES (1)", "DELETE FROM sq WHERE id = 1"):
            with pytest.raises(pymysql.err.OperationalError) as e:
                cur.execute(statement)
            assert e.value.args[0] == ER_BINLOG_STMT_MODE_AND_ROW_ENGINE, e.value.args
            assert "BINLOG_FORMAT = STATEMENT" in e.value.args[1], e.value.args
        cur.execute("SET SESSION binlog_format = 'MIXED'")
        cur.execute("INSERT INTO sq VALUES (1), (2)")
        cur.execute("SET SESSION binlog_format = 'STATEMENT'")
        cur.execute("SELECT id FROM sq WHERE queue_wait('sq', 0)")  # consuming is allowed
        assert cur.fetchall() == ((1,),)
        cur.execute("SELECT queue_end()")
        cur.execute("TRUNCATE TABLE sq")
        cur.execute("ALTER TABLE sq ADD COLUMN v INT")
    finally:
        s.destroy()


def test_a_binary_log_checkpoint_is_given_once_queue_commits_are_durable(binlog_server):
    """QUEUE leaves a two-phase commit's record unsynced while the binary log can recover the
    transaction (commit_checkpoint_request): at a rotation the log asks, QUEUE syncs and
    answers, and the log moves its checkpoint to the new file."""
    s = binlog_server
    cur = s.connect().cursor()
    cur.execute("DROP TABLE IF EXISTS kq")
    cur.execute("CREATE TABLE kq (id INT NOT NULL) ENGINE=QUEUE")
    cur.execute("INSERT INTO kq VALUES (1), (2)")
    cur.execute("SELECT id FROM kq WHERE queue_wait('kq', 1)")
    cur.execute("SELECT queue_end()")
    cur.execute("FLUSH BINARY LOGS")
    newest = binlog_position(cur)[0]

    def checkpointed():
        cur.execute(f"SHOW BINLOG EVENTS IN '{newest}'")
        return any(r[2] == "Binlog_checkpoint" and r[5] == newest for r in cur.fetchall())
    wait_until(checkpointed, timeout=30, what="a binlog checkpoint naming the new file")
    cur.execute("SELECT id FROM kq")
    assert cur.fetchall() == ((2,),)


def test_a_killed_wait_gives_the_row_it_would_have_ended_back(binlog_server):
    """With the binary log on the end inside queue_wait() commits with its statement: a wait
    killed while it sleeps gives the previous row back (delivered again) and logs nothing."""
    s = binlog_server
    cur = s.connect().cursor()
    cur.execute("DROP TABLE IF EXISTS wq")
    cur.execute("CREATE TABLE wq (id INT NOT NULL) ENGINE=QUEUE")
    cur.execute("INSERT INTO wq VALUES (1)")
    c = s.connect()
    assert query(c, "SELECT id FROM wq WHERE queue_wait('wq', 0)") == [(1,)]
    before = binlog_position(cur)
    bg = Background(lambda: query(c, "SELECT id FROM wq WHERE queue_wait('wq', 60)"))  # ends 1, sleeps
    wait_until(lambda: s.value("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID=%s",
                               (c.thread_id(),)) == WAITING_FOR_ROW, what="the wait to sleep")
    cur.execute(f"KILL QUERY {c.thread_id()}")
    with pytest.raises(pymysql.err.OperationalError) as e:
        bg.join(60)
    assert e.value.args[0] == 1317, e.value.args  # interrupted
    assert removals_logged(binlog_events(cur, before), "wq") == []
    other = s.connect()
    assert query(other, "SELECT id FROM wq WHERE queue_wait('wq', 0)") == [(1,)]


def test_a_removal_by_any_statement_stays_in_its_transaction(binlog_server):
    """`DO queue_end()` or `CALL` a procedure that ends the row: the removal statement goes into
    the transaction's cache whatever the statement ending the row is (the engine sets the cache;
    MariaDB would write a COMMIT's event at once, test_replication's duplicates test needs that),
    so a rolled-back removal never reaches a replica."""
    s = binlog_server
    cur = s.connect().cursor()
    cur.execute("DROP TABLE IF EXISTS dq")
    cur.execute("DROP PROCEDURE IF EXISTS end_job")
    cur.execute("CREATE TABLE dq (id INT NOT NULL) ENGINE=QUEUE")
    cur.execute("CREATE PROCEDURE end_job() SELECT queue_end()")
    cur.execute("INSERT INTO dq VALUES (1),(2)")
    before = binlog_position(cur)
    for end in ("DO queue_end()", "CALL end_job()"):
        cur.execute("BEGIN")
        cur.execute("SELECT id FROM dq WHERE queue_wait('dq', 1)")
        assert cur.fetchall() == ((1,),)
        cur.execute(end)
        cur.execute("ROLLBACK")  # row 1 stays, and its removal must not be logged
    assert binlog_events(cur, before) == [] or removals_logged(binlog_events(cur, before), "dq") == []
    cur.execute("BEGIN")
    cur.execute("SELECT id FROM dq WHERE queue_wait('dq', 1)")
    cur.execute("DO queue_end()")
    cur.execute("COMMIT")
    events = binlog_events(cur, before)
    assert removals_logged(events, "dq") == [[(1, 6)]], events
    kinds = [t for t, _ in without_redo(events)]
    assert kinds == ["Gtid", "Query", "Xid"], events  # one transaction holding the removal
    assert len(events) - len(without_redo(events)) == (1 if redo_applies(s) else 0), events  # and its prepare's redo
    cur.execute("SELECT id FROM dq")
    assert cur.fetchall() == ((2,),)


def test_an_xa_transaction_that_inserts_a_duplicate_fails_its_prepare(binlog_server):
    """With the binary log on, the duplicates a DEDUP_COLUMN table drops are logged at the
    prepare, after the transaction's rows; an XA PREPARE has written those by then, so an XA
    transaction inserting a duplicate is refused there, with the table named, not logged wrong."""
    s = binlog_server
    cur = s.connect().cursor()
    cur.execute("DROP TABLE IF EXISTS xq")
    cur.execute("CREATE TABLE xq (id INT NOT NULL, k VARCHAR(8)) ENGINE=QUEUE DEDUP_COLUMN='k'")
    cur.execute("INSERT INTO xq VALUES (1, 'a')")
    cur.execute("XA START 'fresh'")
    cur.execute("INSERT INTO xq VALUES (2, 'b')")
    cur.execute("XA END 'fresh'")
    cur.execute("XA PREPARE 'fresh'")
    cur.execute("XA COMMIT 'fresh'")
    cur.execute("XA START 'dup'")
    cur.execute("INSERT INTO xq VALUES (3, 'a')")
    cur.execute("XA END 'dup'")
    with pytest.raises(pymysql.err.MySQLError) as e:
        cur.execute("XA PREPARE 'dup'")
    assert "xq" in str(e.value) and "DEDUP_COLUMN" in str(e.value) and "XA" in str(e.value), e.value.args
    cur.execute("XA RECOVER")
    assert cur.fetchall() == ()
    cur.execute("SELECT id FROM xq")
    assert cur.fetchall() == ((1,), (2,))


def test_an_expiry_is_a_logged_transaction_of_its_own(server_factory):
    """With the binary log on, MESSAGE_TTL's expiry is a transaction of the engine's own
    session, logged as the removal of the expired rows by id (queue_apply_removal). It commits
    on a server whose sessions start with autocommit=0 too, and a table another session holds
    with LOCK TABLES holds back that table's expiry only (the session waits a second for it,
    then retries), not the other tables'."""
    s = server_factory.new(extra_args=["--log-bin=q4m-bin", "--server-id=1", "--autocommit=0"])
    try:
        c = s.connect()
        cur = c.cursor()
        start = binlog_position(cur)
        for t in ("xa", "xb"):
            query(c, f"CREATE TABLE {t} (v INT) ENGINE=QUEUE MESSAGE_TTL=1")
            query(c, f"INSERT INTO {t} VALUES (1), (2)")
        query(c, "COMMIT")
        held = lambda t: s.queue_stats(f"test.{t}")["rows"]  # noqa: E731
        locker = s.connect()
        query(locker, "LOCK TABLES xb WRITE")
        try:
            wait_until(lambda: held("xa") == 0, timeout=10, what="xa's expiry")
            time.sleep(1.5)
            assert held("xb") == 2  # claimed, not removed: its table is locked
        finally:
            query(locker, "UNLOCK TABLES")
        wait_until(lambda: held("xb") == 0, timeout=10, what="xb's expiry once unlocked")
        events = binlog_events(cur, start)
        assert removals_logged(events, "xa") == [[(1, 6), (2, 6)]], events
        assert removals_logged(events, "xb") == [[(1, 6), (2, 6)]], events
    finally:
        s.destroy()


def test_a_server_whose_engine_session_expired_rows_shuts_down_and_restarts_cleanly(server_factory):
    """The engine's expiry session is closed at the server's shutdown while the binary log is
    still open (closing it later crashed the shutdown with signal 11 in the binary log's
    close_connection); the rows it expired stay expired after the restart."""
    s = server_factory.new(extra_args=["--log-bin=q4m-bin", "--server-id=1"], at_startup=True)
    try:
        c = s.connect()
        query(c, "CREATE TABLE xs (v INT) ENGINE=QUEUE MESSAGE_TTL=1")
        query(c, "INSERT INTO xs VALUES (1), (2)")
        wait_until(lambda: s.queue_stats("test.xs")["rows_expired"] == 2, timeout=10, what="the expiry")
        s.stop()  # raises if the server crashed on its way down
        s.start()
        assert s.value("SELECT COUNT(*) FROM test.xs") == 0
    finally:
        s.destroy()


def test_rows_claimed_for_an_expiry_of_a_renamed_table_are_removed_under_its_new_name(server_factory):
    """The engine's session names the table it expires rows of; renamed before the session got
    to it (here: while LOCK TABLES held it, so the session gave up on the old name), the rows
    are removed under the new name, not kept claimed for good."""
    s = server_factory.new(extra_args=["--log-bin=q4m-bin", "--server-id=1"])
    try:
        c = s.connect()
        query(c, "CREATE TABLE xr (v INT) ENGINE=QUEUE MESSAGE_TTL=1")
        query(c, "INSERT INTO xr VALUES (1), (2)")
        held = lambda t: s.queue_stats(f"test.{t}")["rows"]  # noqa: E731
        owned = lambda t: s.queue_stats(f"test.{t}")["owned_rows"]  # noqa: E731
        locker = s.connect()
        query(locker, "LOCK TABLES xr WRITE")
        try:
            wait_until(lambda: owned("xr") == 2, timeout=10, what="the rows claimed for the expiry")
            time.sleep(1.5)  # the session tried and gave up on xr meanwhile
            query(locker, "ALTER TABLE xr RENAME TO xr2")
        finally:
            query(locker, "UNLOCK TABLES")
        wait_until(lambda: held("xr2") == 0, timeout=10, what="the expiry under the new name")
    finally:
        s.destroy()


def _engine_status(s, name):
    return int(dict((r[1], r[2]) for r in s.sql("SHOW ENGINE QUEUE STATUS"))[name])


def test_commit_records_sharing_a_chunk_with_prepares_are_answered_before_its_sync(binlog_server):
    """Producers and consumers commit in two phases at once: a commit record (unsynced, the
    binlog recovers it) often shares its chunk with other transactions' prepares, which sync.
    It is published and answered once written (commit_records_before_sync). Every row is taken
    exactly once and the table ends empty. (The first version of this crashed the server on
    such a chunk: a null request in the batch; q4m-bench multireader found it.)"""
    import threading

    s = binlog_server
    s.sql("CREATE TABLE test.mixq (id INT NOT NULL) ENGINE=QUEUE")
    before = _engine_status(s, "commit_records_before_sync")
    def background_syncs():  # each pass's sync, and a synced mark's
        return _engine_status(s, "background_syncs") + _engine_status(s, "background_sync_marks")
    syncs_before, background_before = _engine_status(s, "sys_sync"), background_syncs()
    per_producer, producers, consumers = 150, 4, 4
    taken, errors, lock = [], [], threading.Lock()
    produced = threading.Event()

    def produce(p):
        try:
            c = s.connect()
            for i in range(per_producer):
                query(c, "INSERT INTO test.mixq VALUES (%s)", (p * per_producer + i,))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    def consume():
        try:
            c = s.connect()
            cur = c.cursor()
            while True:
                cur.execute("SELECT id FROM test.mixq WHERE queue_wait('test.mixq', 0.2)")
                row = cur.fetchone()
                if row is None:
                    if produced.is_set():
                        break
                    continue
                with lock:
                    taken.append(row[0])
            cur.execute("SELECT queue_end()")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    ps = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    cs = [threading.Thread(target=consume) for _ in range(consumers)]
    for t in ps + cs:
        t.start()
    for t in ps:
        t.join()
    produced.set()
    for t in cs:
        t.join()
    assert errors == []
    assert sorted(taken) == list(range(producers * per_producer))  # each row exactly once
    assert s.value("SELECT COUNT(*) FROM test.mixq") == 0
    early = _engine_status(s, "commit_records_before_sync") - before
    print("commit records answered before their chunk's sync:", early)
    if redo_applies(s):
        # No prepare syncs: no chunk is synced on the commit path, only in the background (and
        # the redo marker's sync, once per server, if this made the first unsynced prepare).
        syncs = _engine_status(s, "sys_sync") - syncs_before
        background = background_syncs() - background_before
        assert early == 0 and syncs - background <= 2, (early, syncs, background)
    else:
        assert early > 0  # ~800 of ~1,200 commits on a 2-core VM: 8 connections always share chunks
    s.sql("DROP TABLE test.mixq")


def test_the_suites_servers_run_the_configuration_users_run(server):
    """A test server with the binary log on runs it as `./q4m.sh run` does: synced at every
    commit, QUEUE's redo riding it (so every binlog-on test exercises the one-log path)."""
    assert server.value("SELECT @@global.log_bin") == 1
    assert redo_applies(server)
