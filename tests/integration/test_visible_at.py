"""VISIBLE_AT_COLUMN: per-message delay (SQS DelaySeconds, pgmq's send delay, Solid Queue's
scheduled_at). A TIMESTAMP column named by the table option holds the time before which
its row is not handed out. The time is part of the row: it survives restarts and kill -9."""
import json
import time

from sqlcheck import expect_error, query, value

ER_ILLEGAL_HA_CREATE_OPTION = 1478
JOBS = ("CREATE TABLE test.jobs (id INT, run_at TIMESTAMP(3) NULL) ENGINE=QUEUE "
        "VISIBLE_AT_COLUMN='run_at'")


def _delayed(server):
    return json.loads(server.value("SELECT queue_stats('test.jobs')"))["delayed_rows"]


def test_a_row_is_handed_out_once_its_time_has_come(server):
    server.sql(JOBS)
    assert "`VISIBLE_AT_COLUMN`='run_at'" in server.sql("SHOW CREATE TABLE test.jobs")[0][1]
    c = server.connect()
    inserted_at = time.monotonic()
    query(c, "INSERT INTO jobs VALUES (1, NOW(3) + INTERVAL 2 SECOND), (2, NULL), "
             "(3, NOW(3) - INTERVAL 1 HOUR), (4, NOW(3) + INTERVAL 1 HOUR)")
    assert _delayed(server) == 2
    assert value(c, "SELECT COUNT(*) FROM jobs") == 4  # delayed rows are queued rows
    assert server.value("SELECT DELAYED_ROWS FROM information_schema.QUEUE_TABLES "
                        "WHERE TABLE_NAME='jobs'") == 2
    got = []
    for _ in range(2):  # the rows due now, in insert order
        got += [r[0] for r in query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)")]
        assert value(c, "SELECT queue_end()") == 1
    assert got == [2, 3]
    assert value(c, "SELECT queue_wait('jobs', 0)") == 0
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 30)") == [(1,)]  # when due
    # NOW(3) truncates to the millisecond, so the row is due up to 1 ms before 2 s after
    # inserted_at (measured 1.9998 s once): allow those few milliseconds, not more.
    assert time.monotonic() - inserted_at >= 2 - 0.005
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('jobs', 0)") == 0  # the one due in an hour waits
    assert value(c, "SELECT queue_end()") == 1  # (owner mode owning no row, as Q4M: left)
    with c.cursor() as cur:
        assert cur.execute("DELETE FROM jobs WHERE id = 4") == 1  # but can be deleted
    assert _delayed(server) == 0


def test_the_time_is_utc_whatever_the_session_time_zone(server):
    server.sql(JOBS)
    c = server.connect()
    query(c, "SET time_zone = '+13:00'")
    query(c, "INSERT INTO jobs VALUES (1, NOW())")
    query(c, "SET time_zone = '-12:00'")
    query(c, "INSERT INTO jobs VALUES (2, NOW() + INTERVAL 1 HOUR)")
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(1,)]
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('jobs', 0)") == 0


def test_the_delay_survives_kill9_whichever_way_the_table_is_first_used(server):
    server.sql(JOBS)
    server.sql("INSERT INTO test.jobs VALUES (1, NOW(3) + INTERVAL 1 HOUR), (2, NOW(3))")
    for first_use in ["SELECT queue_wait('test.jobs', 0)",               # not opened by the statement
                      "SELECT id FROM test.jobs WHERE queue_wait('test.jobs', 0)"]:  # opened by it
        server.restart(kill=True)
        c = server.connect()
        query(c, first_use)
        assert value(c, "SELECT id FROM jobs") == 2  # the row due now, not the delayed one
        assert value(c, "SELECT queue_abort()") == 1
        assert _delayed(server) == 1
    c = server.connect()
    assert value(c, "SELECT queue_wait('jobs', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('jobs', 0)") == 0
    assert value(c, "SELECT queue_end()") == 1  # (owner mode owning no row, as Q4M: left)
    assert value(c, "SELECT COUNT(*) FROM jobs") == 1


def test_the_delay_survives_a_clean_restart_and_a_copying_alter_that_keeps_the_column(server):
    """The index snapshot of a clean close keeps retry delays only: the column's delays come
    from the rows again when the table is first opened, and in a copying ALTER's new table."""
    server.sql(JOBS)
    server.sql("INSERT INTO test.jobs VALUES (1, NOW(3) + INTERVAL 1 HOUR), (2, NOW(3))")
    server.restart(kill=False)
    assert _delayed(server) == 1
    server.sql("ALTER TABLE test.jobs ADD COLUMN note INT")
    assert _delayed(server) == 1
    c = server.connect()
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(2,)]
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('jobs', 0)") == 0


def test_alter_adds_and_removes_the_option_on_a_table_with_rows(server):
    server.sql("CREATE TABLE test.jobs (id INT, run_at TIMESTAMP NULL) ENGINE=QUEUE")
    server.sql("INSERT INTO test.jobs VALUES (1, NOW() + INTERVAL 1 HOUR), (2, NULL)")
    server.sql("ALTER TABLE test.jobs VISIBLE_AT_COLUMN='run_at'")
    assert _delayed(server) == 1
    c = server.connect()
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(2,)]
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('jobs', 0)") == 0
    server.sql("ALTER TABLE test.jobs VISIBLE_AT_COLUMN=''")  # rows keep their values, lose the delay
    assert _delayed(server) == 0
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(1,)]
    assert value(c, "SELECT queue_end()") == 1


def test_a_wrong_column_is_refused_naming_table_and_column(server):
    cases = [
        ("CREATE TABLE test.b (id INT) ENGINE=QUEUE VISIBLE_AT_COLUMN='nope'",
         "QUEUE table 'test.b': VISIBLE_AT_COLUMN: the table has no column `nope`"),
        ("CREATE TABLE test.b (id INT, t DATETIME) ENGINE=QUEUE VISIBLE_AT_COLUMN='t'",
         "VISIBLE_AT_COLUMN: column `t` is datetime, not a TIMESTAMP"),
        ("CREATE TABLE test.b (id INT) ENGINE=QUEUE VISIBLE_AT_COLUMN='id'",
         "VISIBLE_AT_COLUMN: column `id` is int(11), not a TIMESTAMP"),
        # Naming a string column's type once crashed the server (Field::sql_type() of a
        # share's field, which has no session).
        ("CREATE TABLE test.b (id INT, t VARCHAR(19)) ENGINE=QUEUE VISIBLE_AT_COLUMN='t'",
         "VISIBLE_AT_COLUMN: column `t` is varchar(19), not a TIMESTAMP"),
        ("CREATE TABLE test.b (id INT, t CHAR(19)) ENGINE=QUEUE VISIBLE_AT_COLUMN='t'",
         "VISIBLE_AT_COLUMN: column `t` is char(19), not a TIMESTAMP"),
    ]
    c = server.connect()
    for sql, text in cases:
        code, msg = expect_error(c, sql, text)
        assert code == ER_ILLEGAL_HA_CREATE_OPTION, (code, msg)
    server.sql(JOBS)
    code, msg = expect_error(c, "ALTER TABLE jobs DROP COLUMN run_at",
                             "QUEUE table 'test.jobs': VISIBLE_AT_COLUMN: the table has no column `run_at`")
    assert code == ER_ILLEGAL_HA_CREATE_OPTION, (code, msg)
    code, msg = expect_error(c, "ALTER TABLE jobs MODIFY run_at VARCHAR(30)",
                             "QUEUE table 'test.jobs': VISIBLE_AT_COLUMN: column `run_at` is varchar(30)")
    assert code == ER_ILLEGAL_HA_CREATE_OPTION, (code, msg)
    query(c, "ALTER TABLE jobs CHANGE run_at due TIMESTAMP(3) NULL, VISIBLE_AT_COLUMN='due'")  # both at once
    assert "`VISIBLE_AT_COLUMN`='due'" in server.sql("SHOW CREATE TABLE test.jobs")[0][1]
    # A column name in another case is the same column.
    query(c, "CREATE TABLE b (id INT, RUN_AT TIMESTAMP NULL) ENGINE=QUEUE VISIBLE_AT_COLUMN='run_at'")


def test_batches_and_conditional_waits_skip_rows_not_yet_due(server):
    server.sql(JOBS)
    server.sql("INSERT INTO test.jobs VALUES (1, NULL), (2, NOW(3) + INTERVAL 1 HOUR), (3, NULL), (4, NULL)")
    c = server.connect()
    assert query(c, "SELECT id FROM jobs WHERE queue_wait_batch('jobs', 10, 0)") == [(1,), (3,), (4,)]
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('jobs:id = 2', 0)") == 0  # matches, but is not due
    assert value(c, "SELECT queue_wait('jobs:id > 0', 0)") == 0
    assert value(c, "SELECT queue_end()") == 1  # (owner mode owning no row, as Q4M: left)
    assert value(c, "SELECT COUNT(*) FROM jobs") == 1
