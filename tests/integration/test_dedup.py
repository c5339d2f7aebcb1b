"""DEDUP_COLUMN / DEDUP_WINDOW: deduplication by key within a time window (SQS FIFO's
deduplication id, a "unique job"). An INSERT of a row whose key was inserted less than
DEDUP_WINDOW seconds ago (default 300) succeeds but the row is not queued, whether the
earlier row is still queued or long consumed; a note (code 1062) says how many rows were
dropped. The keys come back from the data file after a restart or kill -9, and compaction
keeps the keys of consumed rows."""
import json
import threading

import pymysql

from sqlcheck import expect_error, query, value

ER_ILLEGAL_HA_CREATE_OPTION = 1478
ER_DUP_ENTRY = 1062
JOBS = ("CREATE TABLE test.jobs (job_key VARCHAR(64) NULL, body TEXT) ENGINE=QUEUE "
        "DEDUP_COLUMN='job_key'")


def _stats(server):
    return json.loads(server.value("SELECT queue_stats('test.jobs')"))


def _take_all(c):
    """Takes and consumes every row: the last, empty wait removes the last row taken."""
    got = []
    while True:
        rows = query(c, "SELECT job_key, body FROM jobs WHERE queue_wait('jobs', 0)")
        if not rows:
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
    assert "`DEDUP_WINDOW`=3600" in query(c, "SHOW CREATE TABLE jobs")[0][1]


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
