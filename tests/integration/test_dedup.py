"""DEDUP_COLUMN / DEDUP_WINDOW: deduplication by key within a time window (SQS FIFO's
deduplication id, a "unique job"). An INSERT of a row whose key was inserted less than
DEDUP_WINDOW seconds ago (default 300) succeeds but the row is not queued, whether the
earlier row is still queued or long consumed; a note (code 1062) says how many rows were
dropped. The keys come back from the data file after a restart or kill -9, and compaction
keeps the keys of consumed rows."""
import re
import threading
import time

import pymysql
import pytest

from sqlcheck import expect_error, query, value

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes

ER_ILLEGAL_HA_CREATE_OPTION = 1478
ER_DUP_ENTRY = 1062
JOBS = ("CREATE TABLE test.jobs (job_key VARCHAR(64) NULL, body TEXT) ENGINE=QUEUE "
        "DEDUP_COLUMN='job_key'")


def _stats(server):
    return server.queue_stats("test.jobs")


def _take_all(c, columns="job_key, body"):
    """Takes and consumes every row: the last, empty wait removes the last row taken (and leaves
    owner mode owning no row, as Q4M, which queue_end() leaves)."""
    got = []
    while True:
        rows = query(c, f"SELECT {columns} FROM jobs WHERE queue_wait('jobs', 0)")
        if not rows:
            assert value(c, "SELECT queue_end()") == 1
            return got
        got.append(rows[0])


def test_a_repeated_key_is_accepted_but_not_queued_and_a_note_says_so(server):
    server.sql(JOBS)
    assert "`DEDUP_COLUMN`='job_key'" in server.sql("SHOW CREATE TABLE test.jobs")[0][1]
    c = server.connect()
    query(c, "INSERT INTO jobs VALUES ('welcome-mail:42', 'first'), ('welcome-mail:43', 'other')")
    assert query(c, "SHOW WARNINGS") == []
    with c.cursor() as cur:
        assert cur.execute("INSERT INTO jobs VALUES ('welcome-mail:42', 'retry')") == 1  # accepted
    notes = query(c, "SHOW WARNINGS")
    assert len(notes) == 1 and notes[0][:2] == ("Note", ER_DUP_ENTRY), notes
    assert "QUEUE table 'test.jobs': 1 row was not inserted" in notes[0][2]
    assert "DEDUP_COLUMN `job_key`" in notes[0][2] and "DEDUP_WINDOW (300 s)" in notes[0][2]
    assert value(c, "SELECT COUNT(*) FROM jobs") == 2
    # Consumed rows still count; rows without a key (NULL) never are duplicates; within one
    # INSERT the first row of a key wins.
    assert _take_all(c) == [("welcome-mail:42", "first"), ("welcome-mail:43", "other")]  # and consumed
    query(c, "INSERT INTO jobs VALUES ('welcome-mail:42', 'late'), (NULL, 'a'), (NULL, 'b'), "
             "('report:7', 'x'), ('report:7', 'y')")
    assert "2 rows were not inserted" in query(c, "SHOW WARNINGS")[0][2]
    assert query(c, "SELECT job_key, body FROM jobs") == [(None, "a"), (None, "b"), ("report:7", "x")]
    stats = _stats(server)
    assert stats["rows_deduplicated"] == 3 and stats["dedup_keys"] == 3
    assert server.value("SELECT DEDUP_KEYS FROM information_schema.QUEUE_TABLES "
                        "WHERE TABLE_SCHEMA='test' AND TABLE_NAME='jobs'") == 3


def test_keys_compare_under_the_columns_collation(server):
    server.sql("CREATE TABLE test.jobs (job_key VARCHAR(64) COLLATE utf8mb4_general_ci) ENGINE=QUEUE "
               "DEDUP_COLUMN='job_key'")
    server.sql("INSERT INTO test.jobs VALUES ('Order-1'), ('ORDER-1'), ('order-1 '), ('order-2')")
    assert server.sql("SELECT job_key FROM test.jobs") == [("Order-1",), ("order-2",)]


def test_the_window_ends_and_alter_changes_it_in_place(server):
    server.sql(JOBS + " DEDUP_WINDOW=1")
    c = server.connect()
    query(c, "INSERT INTO jobs VALUES ('k', '1')")
    query(c, "INSERT INTO jobs VALUES ('k', '2')")
    assert value(c, "SELECT COUNT(*) FROM jobs") == 1
    assert value(c, "SELECT SLEEP(1.2)") == 0
    query(c, "INSERT INTO jobs VALUES ('k', '3')")  # the window is over
    assert value(c, "SELECT COUNT(*) FROM jobs") == 2
    query(c, "ALTER TABLE jobs DEDUP_WINDOW=3600, ALGORITHM=INPLACE")  # no copy: the keys stay
    query(c, "INSERT INTO jobs VALUES ('k', '4')")
    assert value(c, "SELECT COUNT(*) FROM jobs") == 2
    # MariaDB 10.11.19 quotes every option value in SHOW CREATE TABLE (10.11.18: numbers bare).
    assert re.search(r"`DEDUP_WINDOW`='?3600'?", query(c, "SHOW CREATE TABLE jobs")[0][1])


def test_keys_survive_kill9_and_compaction(fresh_server):
    server = fresh_server
    server.sql(JOBS)
    c = server.connect()
    query(c, "INSERT INTO jobs VALUES ('consumed', '1'), ('queued', '2')")
    assert query(c, "SELECT job_key FROM jobs WHERE queue_wait('jobs', 0)") == [("consumed",)]
    assert value(c, "SELECT queue_end()") == 1
    server.kill9()
    server.start()
    c = server.connect()
    query(c, "INSERT INTO jobs VALUES ('consumed', 'again'), ('queued', 'again'), ('new', '3')")
    assert query(c, "SELECT job_key, body FROM jobs") == [("queued", "2"), ("new", "3")]
    _take_all(c)  # the last empty wait consumed the last row
    assert value(c, "SELECT queue_compact('jobs')") == 1  # the consumed rows' bytes go, their keys stay
    server.kill9()
    server.start()
    c = server.connect()
    query(c, "INSERT INTO jobs VALUES ('consumed', 'x'), ('queued', 'x'), ('new', 'x'), ('fresh', 'x')")
    assert query(c, "SELECT job_key FROM jobs") == [("fresh",)]
    assert _stats(server)["dedup_keys"] == 4


def test_concurrent_producers_of_one_key_queue_it_once(server):
    server.sql(JOBS)
    errors = []

    def produce(n):
        try:
            c = server.connect()
            for k in range(50):
                query(c, f"INSERT INTO jobs VALUES ('job-{k}', 'producer {n}')")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert server.value("SELECT COUNT(DISTINCT job_key) FROM test.jobs") == 50
    assert server.value("SELECT COUNT(*) FROM test.jobs") == 50
    assert _stats(server)["rows_deduplicated"] == 250


def test_truncate_forgets_the_keys(server):
    server.sql(JOBS)
    server.sql("INSERT INTO test.jobs VALUES ('k', '1')")
    server.sql("TRUNCATE TABLE test.jobs")
    server.sql("INSERT INTO test.jobs VALUES ('k', '2')")
    assert server.sql("SELECT body FROM test.jobs") == [("2",)]


def test_bad_options_are_refused_naming_table_option_and_column(server):
    c = server.connect()
    cases = [
        ("CREATE TABLE bad (k INT) ENGINE=QUEUE DEDUP_COLUMN='nope'",
         ["QUEUE table 'test.bad'", "DEDUP_COLUMN: the table has no column `nope`"]),
        ("CREATE TABLE bad (k TEXT) ENGINE=QUEUE DEDUP_COLUMN='k'",
         ["QUEUE table 'test.bad'", "DEDUP_COLUMN: column `k` is text", "a dedup key must be"]),
        ("CREATE TABLE bad (k DOUBLE) ENGINE=QUEUE DEDUP_COLUMN='k'", ["DEDUP_COLUMN: column `k` is double"]),
        ("CREATE TABLE bad (k INT) ENGINE=QUEUE DEDUP_WINDOW=60",
         ["QUEUE table 'test.bad'", "DEDUP_WINDOW needs DEDUP_COLUMN"]),
        ("CREATE TABLE bad (k INT) ENGINE=QUEUE DEDUP_COLUMN='k' DEDUP_WINDOW='5 min'",
         ["DEDUP_WINDOW: '5 min' is not a whole number of seconds (1 to 2592000)"]),
    ]
    for sql, fragments in cases:
        expect_error(c, sql, *fragments, code=ER_ILLEGAL_HA_CREATE_OPTION)
    for sql in ("CREATE TABLE bad (k INT) ENGINE=QUEUE DEDUP_COLUMN='k' DEDUP_WINDOW=0",
                "CREATE TABLE bad (k INT) ENGINE=QUEUE DEDUP_COLUMN='k' DEDUP_WINDOW=2592001"):
        try:
            query(c, sql)
            raise AssertionError(f"{sql} was accepted")
        except pymysql.MySQLError as e:
            assert "DEDUP_WINDOW" in str(e), e
    assert value(c, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME='bad'") == 0
    # Dropping the column the option names: the ALTER is refused, the table stays as it was.
    query(c, "CREATE TABLE jobs (k INT, v INT) ENGINE=QUEUE DEDUP_COLUMN='k'")
    expect_error(c, "ALTER TABLE jobs DROP COLUMN k", "DEDUP_COLUMN: the table has no column `k`",
                 code=ER_ILLEGAL_HA_CREATE_OPTION)
    query(c, "INSERT INTO jobs VALUES (1, 1), (1, 2)")
    assert value(c, "SELECT COUNT(*) FROM jobs") == 1


def test_a_copying_alter_keeps_the_keys_of_the_rows_it_copies(server):
    server.sql(JOBS)
    server.sql("INSERT INTO test.jobs VALUES ('queued', '1')")
    server.sql("ALTER TABLE test.jobs ADD COLUMN note INT")
    server.sql("INSERT INTO test.jobs (job_key, body) VALUES ('queued', '2'), ('new', '3')")
    assert server.sql("SELECT job_key, body FROM test.jobs") == [("queued", "1"), ("new", "3")]


def test_kill9_under_load_never_lets_a_key_in_twice_nor_loses_one(fresh_server):
    """Producers insert keys from a small key space (each key asked for by several of them)
    while consumers take rows; the server is killed mid-load, three times. Per key at most
    one row may ever be handed out (an owned row may come back after a kill: the same row),
    every key whose INSERT returned without a duplicate note is handed out, and after each
    restart every key seen so far is still a duplicate."""
    server = fresh_server
    server.sql("SET GLOBAL queue_sync_mode = 'fdatasync'")
    server.sql("CREATE TABLE test.jobs (job_key VARCHAR(32) NOT NULL, producer INT, seq INT) ENGINE=QUEUE "
               "DEDUP_COLUMN='job_key'")
    lock = threading.Lock()
    inserted = {}   # key -> (producer, seq) of the INSERT that went in without a note
    delivered = {}  # key -> set of (producer, seq) handed out
    twice = []      # keys two INSERTs put in without a note
    keys_so_far = 0
    for cycle in range(3):
        stop, killing = threading.Event(), threading.Event()
        errors = []
        key_space = [f"c{cycle}-k{i}" for i in range(300)]

        def produce(p):
            rng_keys = key_space[p::2] + key_space  # each key asked for by several producers
            try:
                c = server.connect()
                for seq, key in enumerate(rng_keys):
                    if stop.is_set():
                        return
                    query(c, f"INSERT INTO jobs VALUES ('{key}', {p}, {seq})")
                    if not query(c, "SHOW WARNINGS"):
                        with lock:
                            if key in inserted:
                                twice.append((key, inserted[key], (p, seq)))
                            inserted[key] = (p, seq)
            except Exception as e:  # noqa: BLE001 - the kill closes the connections under the threads
                if not killing.is_set():
                    errors.append(e)

        def consume():
            try:
                c = server.connect()
                while not stop.is_set():
                    for key, p, seq in query(c, "SELECT job_key, producer, seq FROM jobs WHERE queue_wait('jobs', 1)"):
                        with lock:
                            delivered.setdefault(key, set()).add((p, seq))
            except Exception as e:  # noqa: BLE001 - as above
                if not killing.is_set():
                    errors.append(e)

        threads = [threading.Thread(target=produce, args=(p,)) for p in range(4)]
        threads += [threading.Thread(target=consume) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while len(inserted) < keys_so_far + 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        killing.set()
        server.kill9()
        stop.set()
        for t in threads:
            t.join()
        assert not errors, f"cycle {cycle}: {errors[:3]}"
        server.start()
        c = server.connect()
        for key, p, seq in _take_all(c, "job_key, producer, seq"):
            delivered.setdefault(key, set()).add((p, seq))
        keys_so_far = len(inserted)
        assert not twice, f"cycle {cycle}: keys inserted twice: {twice[:3]}"
        for key, rows in delivered.items():
            assert len(rows) == 1, f"cycle {cycle}: key {key} handed out as {rows}"
        assert set(inserted) <= set(delivered), f"cycle {cycle}: lost {sorted(set(inserted) - set(delivered))[:5]}"
        # Every key seen so far (also those whose INSERT was in flight at the kill) is still known.
        known = sorted(set(inserted) | set(delivered))
        query(c, "INSERT INTO jobs VALUES " + ", ".join(f"('{k}', 9, 9)" for k in known))
        assert value(c, "SELECT COUNT(*) FROM jobs") == 0, f"cycle {cycle}: a known key went in again"
    assert keys_so_far >= 300
    print(f"dedup kill -9 test: {len(inserted)} keys in, {sum(len(r) for r in delivered.values())} handed out")



# ---- the note with the binary log on and off (issue 40 item 5)
# With the binary log on every autocommit INSERT is a statement transaction whose drop is
# decided at its commit (two-phase): the note came only without it. The plugin is loaded at
# startup, as ./q4m.sh run does.
@pytest.fixture
def binlog_server(server, binlog):
    """The shared server of the module's binary log mode (both_binlog_modes)."""
    assert server.value("SELECT @@log_bin") == binlog
    return server


def _dup_notes(c):
    notes = query(c, "SHOW WARNINGS")
    assert all(n[:2] == ("Note", ER_DUP_ENTRY) for n in notes), notes
    return [n[2] for n in notes]


def test_the_duplicate_note_comes_in_autocommit_with_the_binary_log_on_and_off(binlog_server):
    s = binlog_server
    s.sql("DROP TABLE IF EXISTS test.jobs")
    s.sql(JOBS)
    c = s.connect()
    query(c, "INSERT INTO jobs VALUES ('welcome-mail:42', 'first')")
    assert _dup_notes(c) == []
    with c.cursor() as cur:
        assert cur.execute("INSERT INTO jobs VALUES ('welcome-mail:42', 'retry')") == 1  # accepted
    notes = _dup_notes(c)
    assert len(notes) == 1 and "QUEUE table 'test.jobs': 1 row was not inserted" in notes[0], notes
    assert "DEDUP_COLUMN `job_key`" in notes[0] and "DEDUP_WINDOW (300 s)" in notes[0]
    query(c, "INSERT INTO jobs VALUES ('welcome-mail:42', 'x'), ('a', 'y'), ('a', 'z')")
    assert ["2 rows were not inserted" in n for n in _dup_notes(c)] == [True]
    query(c, "INSERT INTO jobs VALUES ('b', 'new')")
    assert _dup_notes(c) == []  # the note is the statement's own
    assert value(c, "SELECT COUNT(*) FROM jobs") == 3
    assert _stats(s)["rows_deduplicated"] == 3


def test_in_a_transaction_the_note_comes_with_the_commit(binlog_server):
    """BEGIN ... COMMIT and autocommit=0: the keys are checked when the transaction commits,
    so the COMMIT carries the note (the INSERT has none: nothing is decided yet)."""
    s = binlog_server
    s.sql("DROP TABLE IF EXISTS test.jobs")
    s.sql(JOBS + " DEDUP_WINDOW=600")
    c = s.connect()
    query(c, "INSERT INTO jobs VALUES ('k1', 'first')")
    query(c, "BEGIN")
    query(c, "INSERT INTO jobs VALUES ('k1', 'again'), ('k2', 'new')")
    assert _dup_notes(c) == []
    query(c, "INSERT INTO jobs VALUES ('k2', 'twice in one transaction')")
    query(c, "COMMIT")
    notes = _dup_notes(c)
    assert len(notes) == 1 and "QUEUE table 'test.jobs': 2 rows were not inserted" in notes[0], notes
    assert "DEDUP_WINDOW (600 s)" in notes[0]
    query(c, "SET autocommit = 0")
    query(c, "INSERT INTO jobs VALUES ('k2', 'again')")
    query(c, "COMMIT")
    assert ["1 row was not inserted" in n for n in _dup_notes(c)] == [True]
    query(c, "INSERT INTO jobs VALUES ('k3', 'new')")
    query(c, "COMMIT")
    assert _dup_notes(c) == []
    query(c, "SET autocommit = 1")
    assert query(c, "SELECT job_key, body FROM jobs") == [("k1", "first"), ("k2", "new"), ("k3", "new")]
    # A rolled-back transaction drops nothing: no note.
    query(c, "BEGIN")
    query(c, "INSERT INTO jobs VALUES ('k1', 'again')")
    query(c, "ROLLBACK")
    assert _dup_notes(c) == []


def test_in_xa_without_the_binary_log_the_note_comes_with_its_prepare(binlog_server):
    """XA PREPARE decides the drop (XA COMMIT ... ONE PHASE when there is no prepare); with the
    binary log on that duplicate is an error instead (test_binlog.py)."""
    s = binlog_server
    if s.value("SELECT @@log_bin"):
        pytest.skip("with the binary log on an XA duplicate is refused: test_binlog.py")
    s.sql("DROP TABLE IF EXISTS test.jobs")
    s.sql(JOBS)
    c = s.connect()
    query(c, "INSERT INTO jobs VALUES ('k1', 'first')")
    query(c, "XA START 'x1'")
    query(c, "INSERT INTO jobs VALUES ('k1', 'again')")
    query(c, "XA END 'x1'")
    query(c, "XA PREPARE 'x1'")
    assert ["1 row was not inserted" in n for n in _dup_notes(c)] == [True]
    query(c, "XA COMMIT 'x1'")  # (a statement without tables keeps the list: no check here)
    query(c, "SELECT COUNT(*) FROM jobs")
    assert _dup_notes(c) == []
    query(c, "XA START 'x2'")
    query(c, "INSERT INTO jobs VALUES ('k1', 'again'), ('k2', 'new')")
    query(c, "XA END 'x2'")
    query(c, "XA COMMIT 'x2' ONE PHASE")
    assert ["1 row was not inserted" in n for n in _dup_notes(c)] == [True]
    assert query(c, "SELECT job_key, body FROM jobs") == [("k1", "first"), ("k2", "new")]
