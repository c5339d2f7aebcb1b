"""MESSAGE_TTL: a queued message older than the table's TTL is removed and never handed out
(SQS's retention period, RabbitMQ's x-message-ttl). A row a consumer owns is left to it; if it
comes back to the queue after its TTL, it is removed then. The insert time is part of the
row, so the age survives restarts and kill -9, and an ALTER TABLE that only changes the TTL
keeps the rows as they are."""
import re
import time

from sqlcheck import expect_error, query, value, wait_until

ER_ILLEGAL_HA_CREATE_OPTION = 1478
ER_BAD_OPTION_VALUE = 1912
ER_ALTER_OPERATION_NOT_SUPPORTED = 1845


def _stats(server, table="test.q"):
    return server.queue_stats(table)


def _global_expired(server):
    return int(dict((r[1], r[2]) for r in server.sql("SHOW ENGINE QUEUE STATUS"))["rows_expired"])


def test_messages_older_than_the_ttl_are_removed_and_never_handed_out(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MESSAGE_TTL=1")
    # MariaDB 10.11.19 quotes every option value in SHOW CREATE TABLE (10.11.18: numbers bare).
    assert re.search(r"`MESSAGE_TTL`='?1'?\s", server.sql("SHOW CREATE TABLE test.q")[0][1] + " ")
    expired_before = _global_expired(server)
    c = server.connect()
    inserted_at = time.monotonic()
    query(c, "INSERT INTO q VALUES (1), (2), (3)")
    assert value(c, "SELECT COUNT(*) FROM q") == 3
    wait_until(lambda: value(c, "SELECT COUNT(*) FROM q") == 0, what="the rows to expire")
    assert time.monotonic() - inserted_at >= 1
    assert value(c, "SELECT queue_wait('q', 0)") == 0
    # The expiry claims the rows (no statement sees them from then on) and counts them once its
    # removal commits, after the binary log's sync with the binary log on: a moment later.
    wait_until(lambda: _stats(server)["rows_expired"] == 3, what="the expiry's commit")
    stats = _stats(server)
    assert (stats["rows_expired"], stats["rows_removed"], stats["rows"]) == (3, 3, 0)
    assert _global_expired(server) - expired_before == 3
    query(c, "INSERT INTO q VALUES (4)")  # the table stays watched after it emptied
    wait_until(lambda: _stats(server)["rows_expired"] == 4, what="the next row to expire")


def test_a_row_being_worked_on_is_left_to_its_owner_and_expires_if_it_comes_back(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MESSAGE_TTL=1")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    a, b = server.connect(), server.connect()
    assert query(a, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    assert query(b, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]
    wait_until(lambda: _stats(server)["oldest_age_ms"] > 1500, what="the TTL to pass")
    assert _stats(server)["rows"] == 2  # both owned: nothing expired
    assert value(a, "SELECT queue_end()") == 1  # the job finished in time for its owner
    assert value(b, "SELECT queue_abort()") == 1  # a retry after the TTL: removed instead
    wait_until(lambda: _stats(server)["rows"] == 0, what="the returned row to expire")
    assert value(a, "SELECT queue_wait('q', 0)") == 0
    stats = _stats(server)
    assert (stats["ends"], stats["rows_expired"]) == (1, 1)


def test_alter_changes_the_ttl_in_place_and_the_rows_keep_their_age(server):
    server.sql("CREATE TABLE test.q (v INT, due TIMESTAMP NULL) ENGINE=QUEUE")
    c = server.connect()
    query(c, "INSERT INTO q (v) VALUES (1)")
    assert query(c, "SELECT v, queue_delivery_count() FROM q WHERE queue_wait('q', 0)") == [(1, 1)]
    assert value(c, "SELECT queue_abort()") == 1
    wait_until(lambda: _stats(server)["oldest_age_ms"] > 1200, what="the row to age")
    query(c, "ALTER TABLE q MESSAGE_TTL=3600, ALGORITHM=INPLACE")
    # In place: the same row, its delivery count and its age (a copy would re-insert it).
    assert query(c, "SELECT v, queue_delivery_count() FROM q WHERE queue_wait('q', 0)") == [(1, 2)]
    assert value(c, "SELECT queue_abort()") == 1
    assert _stats(server)["oldest_age_ms"] > 1200
    query(c, "ALTER TABLE q MESSAGE_TTL=1")  # the row is past the new TTL: it is removed
    # (at once with the binary log off; with it on by the expiry session, which logs the removal)
    wait_until(lambda: _stats(server)["rows"] == 0, what="the expired row to go")
    assert _stats(server)["rows_expired"] == 1
    query(c, "INSERT INTO q (v) VALUES (2)")
    query(c, "ALTER TABLE q MESSAGE_TTL=0")  # off again
    time.sleep(1.5)
    assert query(c, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(2,)]
    assert value(c, "SELECT queue_end()") == 1
    # Anything beyond the options still copies the rows.
    expect_error(c, "ALTER TABLE q ADD COLUMN w INT, ALGORITHM=INPLACE", code=ER_ALTER_OPERATION_NOT_SUPPORTED)
    expect_error(c, "ALTER TABLE q VISIBLE_AT_COLUMN='due', ALGORITHM=INPLACE",
                 code=ER_ALTER_OPERATION_NOT_SUPPORTED)


def test_age_survives_kill9_and_rows_that_expired_while_down_are_never_handed_out(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MESSAGE_TTL=2")
    for first_use in ["SELECT queue_wait('test.q', 0)",                  # not opened by the statement
                      "SELECT v FROM test.q WHERE queue_wait('test.q', 0)"]:  # opened by it
        server.sql("INSERT INTO test.q VALUES (1)")
        server.kill9()
        time.sleep(2.2)  # the TTL runs out while the server is down
        server.start()
        c = server.connect()
        assert query(c, first_use) in ([(0,)], [])
        assert value(c, "SELECT COUNT(*) FROM q") == 0
        c.close()


def test_expired_rows_stay_removed_after_kill9(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE MESSAGE_TTL=1")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    wait_until(lambda: _stats(server)["rows_expired"] == 2, what="the rows to expire")
    server.sql("ALTER TABLE test.q MESSAGE_TTL=0")  # nothing would expire them again
    server.restart(kill=True)
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_bad_values_are_refused_with_the_option_named(server):
    c = server.connect()
    for bad in ["'abc'", "'12abc'", "''"]:
        expect_error(c, f"CREATE TABLE q (v INT) ENGINE=QUEUE MESSAGE_TTL={bad}", "MESSAGE_TTL",
                     "not a whole number of seconds", "test.q", code=ER_ILLEGAL_HA_CREATE_OPTION)
    expect_error(c, "CREATE TABLE q (v INT) ENGINE=QUEUE MESSAGE_TTL=3153600001", "MESSAGE_TTL",
                 code=ER_BAD_OPTION_VALUE)
    query(c, "CREATE TABLE q (v INT) ENGINE=QUEUE MESSAGE_TTL='60'")  # a quoted number is a number
    assert "`MESSAGE_TTL`='60'" in server.sql("SHOW CREATE TABLE test.q")[0][1]
    for alter in ["ALTER TABLE q MESSAGE_TTL='x'", "ALTER TABLE q MESSAGE_TTL='x', ADD COLUMN w INT"]:
        expect_error(c, alter, "MESSAGE_TTL", "'x'", code=ER_ILLEGAL_HA_CREATE_OPTION)
    assert "`MESSAGE_TTL`='60'" in server.sql("SHOW CREATE TABLE test.q")[0][1]
