"""Transactions (docs/transactions.md): inside BEGIN ... COMMIT (or autocommit=0) rows inserted
into a QUEUE table and rows consumed from it take effect at COMMIT, together with the
transaction's InnoDB rows; ROLLBACK (a savepoint's, a failed statement's, a disconnect) leaves
nothing behind and gives consumed rows back. In autocommit each statement acts at once, as
before."""
import pymysql

from sqlcheck import expect_error, query, value

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes

ER_RECORD_FILE_FULL = 1114


def _tables(server, queue_options=""):
    server.sql(f"CREATE TABLE test.q (id INT, body VARCHAR(20)) ENGINE=QUEUE {queue_options}")
    server.sql("CREATE TABLE test.orders (id INT PRIMARY KEY) ENGINE=InnoDB")


def _take_all(conn, table="q"):
    """Consumes every row it can take now (autocommit); returns their ids in order."""
    got = []
    while value(conn, f"SELECT queue_wait('{table}', 0)") == 1:
        got += [r[0] for r in query(conn, f"SELECT id FROM {table}")]
    value(conn, "SELECT queue_end()")  # the timed-out wait left owner mode owning nothing
    return got


def test_rows_inserted_in_a_transaction_appear_at_commit_with_the_innodb_rows(server):
    _tables(server)
    producer, other, consumer = server.connect(), server.connect(), server.connect()
    query(producer, "BEGIN")
    query(producer, "INSERT INTO orders VALUES (1)")
    query(producer, "INSERT INTO q VALUES (1, 'order 1'), (2, 'order 1 mail')")
    # The producer sees its own rows, nobody else does, and no consumer gets one.
    assert query(producer, "SELECT id FROM q") == [(1,), (2,)]
    assert value(producer, "SELECT COUNT(*) FROM q") == 2
    assert query(other, "SELECT id FROM q") == []
    assert value(other, "SELECT COUNT(*) FROM q") == 0
    assert value(consumer, "SELECT queue_wait('q', 0)") == 0
    value(consumer, "SELECT queue_end()")
    query(producer, "COMMIT")
    assert query(other, "SELECT id FROM q") == [(1,), (2,)]
    assert query(other, "SELECT id FROM orders") == [(1,)]
    assert _take_all(consumer) == [1, 2]


def test_rollback_discards_the_queue_rows_with_the_innodb_rows(server):
    _tables(server)
    c = server.connect()
    next_rowid = value(c, "SELECT NEXT_ROWID FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")
    query(c, "BEGIN")
    query(c, "INSERT INTO orders VALUES (1)")
    query(c, "INSERT INTO q VALUES (1, 'a')")
    query(c, "ROLLBACK")
    assert value(c, "SELECT COUNT(*) FROM orders") == 0
    assert value(c, "SELECT COUNT(*) FROM q") == 0
    # No row id was used: a relay reading this table sees no gap.
    assert value(c, "SELECT NEXT_ROWID FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'") == next_rowid
    # No warning that a non-transactional table could not be rolled back.
    assert query(c, "SHOW WARNINGS") == []


def test_autocommit_off_works_like_begin(server):
    _tables(server)
    c, other = server.connect(), server.connect()
    query(c, "SET autocommit = 0")
    query(c, "INSERT INTO q VALUES (1, 'a')")
    assert value(other, "SELECT COUNT(*) FROM q") == 0
    query(c, "COMMIT")
    assert value(other, "SELECT COUNT(*) FROM q") == 1
    query(c, "INSERT INTO q VALUES (2, 'b')")
    query(c, "ROLLBACK")
    assert query(other, "SELECT id FROM q") == [(1,)]


def test_a_disconnect_rolls_back(server):
    _tables(server)
    c = server.connect()
    query(c, "BEGIN")
    query(c, "INSERT INTO q VALUES (1, 'a')")
    c.close()
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_rollback_to_savepoint_discards_only_the_rows_after_it(server):
    _tables(server)
    c = server.connect()
    query(c, "BEGIN")
    query(c, "INSERT INTO q VALUES (1, 'kept')")
    query(c, "SAVEPOINT s1")
    query(c, "INSERT INTO q VALUES (2, 'undone')")
    query(c, "INSERT INTO orders VALUES (2)")
    query(c, "ROLLBACK TO SAVEPOINT s1")
    assert query(c, "SELECT id FROM q") == [(1,)]
    query(c, "COMMIT")
    assert server.sql("SELECT id, body FROM test.q") == [(1, "kept")]
    assert server.value("SELECT COUNT(*) FROM test.orders") == 0


def test_a_failed_statement_in_a_transaction_leaves_the_earlier_ones(server):
    server.sql("CREATE TABLE test.q (id INT NOT NULL, body VARCHAR(20)) ENGINE=QUEUE")
    c = server.connect()
    query(c, "SET sql_mode = 'STRICT_ALL_TABLES'")
    query(c, "BEGIN")
    query(c, "INSERT INTO q VALUES (1, 'a')")
    expect_error(c, "INSERT INTO q VALUES (2, 'b'), (NULL, 'c')", code=1048)  # column cannot be null
    query(c, "COMMIT")
    assert server.sql("SELECT id FROM test.q") == [(1,)]


def test_a_row_deleted_in_a_transaction_is_held_until_commit(server):
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (1, 'a'), (2, 'b')")
    c, other = server.connect(), server.connect()
    query(c, "BEGIN")
    query(c, "DELETE FROM q WHERE id = 1")
    assert query(c, "SELECT id FROM q") == [(2,)]
    assert query(other, "SELECT id FROM q") == [(2,)]  # held: nobody else sees or takes it
    assert _take_all(other) == [2]
    query(c, "ROLLBACK")
    assert query(other, "SELECT id FROM q") == [(1,)]  # back
    query(c, "BEGIN")
    query(c, "DELETE FROM q")
    query(c, "COMMIT")
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_a_row_inserted_and_deleted_in_one_transaction_never_appears(server):
    _tables(server)
    c = server.connect()
    query(c, "BEGIN")
    query(c, "INSERT INTO q VALUES (1, 'a'), (2, 'b')")
    query(c, "DELETE FROM q WHERE id = 1")
    assert query(c, "SELECT id FROM q") == [(2,)]
    query(c, "COMMIT")
    assert server.sql("SELECT id FROM test.q") == [(2,)]


def test_consume_in_a_transaction_takes_effect_at_commit(server):
    """Exactly-once processing: take a job, write its result, acknowledge it, in one COMMIT."""
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (1, 'job 1'), (2, 'job 2')")
    worker, other = server.connect(), server.connect()
    query(worker, "BEGIN")
    assert value(worker, "SELECT queue_wait('q', 0)") == 1
    job = value(worker, "SELECT id FROM q")
    query(worker, "INSERT INTO orders VALUES (%s)", (job,))
    assert value(worker, "SELECT queue_end()") == 1
    # Held by the open transaction: no other consumer gets it.
    assert _take_all(other) == [2]
    server.sql("INSERT INTO test.q VALUES (3, 'job 3')")
    query(worker, "COMMIT")
    assert server.value("SELECT COUNT(*) FROM test.orders") == 1
    assert server.sql("SELECT id FROM test.q") == [(3,)]  # 1 by the commit, 2 by the other consumer


def test_a_rolled_back_consume_gives_the_row_back_with_its_delivery_count(server):
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (1, 'job')")
    worker = server.connect()
    query(worker, "BEGIN")
    assert value(worker, "SELECT queue_wait('q', 0)") == 1
    query(worker, "INSERT INTO orders VALUES (1)")
    assert value(worker, "SELECT queue_end()") == 1
    query(worker, "ROLLBACK")
    assert server.value("SELECT COUNT(*) FROM test.orders") == 0
    other = server.connect()
    assert value(other, "SELECT queue_wait('q', 0)") == 1
    assert value(other, "SELECT queue_delivery_count()") == 2  # as after queue_abort()


def test_the_implicit_end_of_the_next_wait_joins_the_transaction(server):
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (1, 'a'), (2, 'b')")
    worker = server.connect()
    query(worker, "BEGIN")
    assert value(worker, "SELECT queue_wait('q', 0)") == 1
    assert value(worker, "SELECT queue_wait('q', 0)") == 1  # ends row 1 into the transaction
    assert value(worker, "SELECT id FROM q") == 2
    assert value(worker, "SELECT queue_abort()") == 1
    query(worker, "ROLLBACK")
    assert server.sql("SELECT id FROM test.q") == [(1,), (2,)]


def test_a_batch_ended_in_a_transaction_is_removed_at_commit(server):
    _tables(server)
    server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i}, 'x')" for i in range(1, 6)))
    worker = server.connect()
    query(worker, "BEGIN")
    assert value(worker, "SELECT queue_wait_batch('q', 3, 0)") == 3
    assert value(worker, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q") == 2
    query(worker, "COMMIT")
    assert server.sql("SELECT id FROM test.q") == [(4,), (5,)]


def test_max_rows_is_checked_at_commit(server):
    _tables(server, "MAX_ROWS=2")
    c = server.connect()
    query(c, "BEGIN")
    query(c, "INSERT INTO q VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    query(c, "INSERT INTO orders VALUES (1)")
    errno, msg = _commit_error(c)
    assert errno == ER_RECORD_FILE_FULL, (errno, msg)
    assert "is full" in msg
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    assert server.value("SELECT COUNT(*) FROM test.orders") == 0  # rolled back with it


def _commit_error(c):
    try:
        query(c, "COMMIT")
    except pymysql.MySQLError as e:
        return e.args[0], e.args[1]
    raise AssertionError("COMMIT succeeded")


def test_relayed_rows_commit_and_roll_back_with_the_innodb_rows(server):
    """queue_set_srcid() rows inside a transaction (refused before): they and the source's
    record come and go with the InnoDB rows."""
    _tables(server)
    c = server.connect()
    for end, kept in (("ROLLBACK", []), ("COMMIT", [(1,)])):
        query(c, "BEGIN")
        value(c, "SELECT queue_set_srcid(1, 'a', 5)")
        query(c, "INSERT INTO q VALUES (1, 'a')")
        query(c, "INSERT INTO orders VALUES (1)")
        query(c, end)
        assert server.sql("SELECT id FROM test.q") == kept
        assert server.sql("SELECT id FROM test.orders") == kept
    value(c, "SELECT queue_set_srcid(1, 'a', 5)")  # received by the commit: a replay
    query(c, "INSERT INTO q VALUES (1, 'again')")
    assert server.sql("SELECT id FROM test.q") == [(1,)]


def test_autocommit_statements_act_at_once_as_before(server):
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (1, 'a')")
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_ddl_waits_for_a_transaction_that_consumed_from_the_table(server):
    """The transaction holds the table's metadata lock from its queue_end() on, as one that
    wrote the table would: a copying ALTER cannot move a row it is removing."""
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (1, 'a'), (2, 'b')")
    worker, ddl = server.connect(), server.connect()
    query(worker, "BEGIN")
    assert value(worker, "SELECT queue_wait('q', 0)") == 1
    assert value(worker, "SELECT queue_end()") == 1
    query(ddl, "SET SESSION lock_wait_timeout = 1")
    expect_error(ddl, "ALTER TABLE q ADD COLUMN extra INT", code=1205)
    query(worker, "COMMIT")
    query(ddl, "ALTER TABLE q ADD COLUMN extra INT")
    assert server.sql("SELECT id FROM test.q") == [(2,)]


def test_rows_consumed_in_a_transaction_are_counted_at_commit_only(server):
    """queue_stats()' rows_consumed counts a transaction's consumed rows once it commits (the
    monitor's 'consumed' rate), not when it rolls back, and not a DELETE."""
    import json
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    worker = server.connect()

    def consumed():
        return json.loads(server.value("SELECT queue_stats('test.q')"))["rows_consumed"]

    query(worker, "BEGIN")
    assert value(worker, "SELECT queue_wait('q', 0)") == 1
    assert value(worker, "SELECT queue_end()") == 1
    query(worker, "ROLLBACK")
    assert consumed() == 0
    query(worker, "BEGIN")
    assert value(worker, "SELECT queue_wait('q', 0)") == 1
    assert value(worker, "SELECT queue_end()") == 1
    query(worker, "DELETE FROM q WHERE id = 3")
    assert consumed() == 0
    query(worker, "COMMIT")
    assert consumed() == 1
    assert server.sql("SELECT id FROM test.q") == [(2,)]
