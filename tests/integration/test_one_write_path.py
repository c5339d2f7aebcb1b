"""One write path (issue 42): every INSERT and DELETE on a QUEUE table goes into a transaction, the
connection's or the statement's own, which the server commits at the statement's end. So a
statement is all or nothing with the binary log on or off, alone or beside InnoDB: before, with
the binary log off an autocommit statement wrote its rows at once (in 1 MB chunks), and kept
them when a later row, or InnoDB's part of the statement, failed."""
from binlog_modes import both_binlog_modes
from sqlcheck import expect_error, query, value

pytestmark = both_binlog_modes


def _count(server, table="test.q"):
    return server.value(f"SELECT COUNT(*) FROM {table}")


def test_a_multi_row_insert_that_fails_keeps_none_of_its_rows(server):
    server.sql("CREATE TABLE test.q (v INT, s VARCHAR(3)) ENGINE=QUEUE")
    c = server.connect()
    query(c, "SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
    expect_error(c, "INSERT INTO test.q VALUES (1, 'a'), (2, 'b'), (3, 'too long')", "Data too long")
    assert _count(server) == 0
    query(c, "INSERT INTO test.q VALUES (1, 'a'), (2, 'b')")
    assert [r[0] for r in server.sql("SELECT v FROM test.q")] == [1, 2]


def test_an_insert_select_of_many_megabytes_that_fails_at_its_end_keeps_nothing(server):
    # Past the 1 MB the old path wrote early: the statement is still one commit.
    server.sql("CREATE TABLE test.q (v INT, s VARCHAR(2000)) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.src (v INT, s VARCHAR(3000)) ENGINE=InnoDB")
    server.sql("INSERT INTO test.src SELECT seq, REPEAT('x', 1500) FROM seq_1_to_3000")
    server.sql("INSERT INTO test.src VALUES (3001, REPEAT('y', 2500))")  # too long for test.q
    c = server.connect()
    query(c, "SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
    expect_error(c, "INSERT INTO test.q SELECT v, s FROM test.src ORDER BY v", "Data too long")
    assert _count(server) == 0
    query(c, "INSERT INTO test.q SELECT v, s FROM test.src WHERE v <= 3000")
    assert _count(server) == 3000


def test_an_innodb_statement_that_fails_takes_back_the_queue_rows_its_trigger_wrote(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.orders (id INT PRIMARY KEY) ENGINE=InnoDB")
    server.sql("CREATE TRIGGER test.outbox AFTER INSERT ON test.orders FOR EACH ROW INSERT INTO test.q VALUES (NEW.id)")
    c = server.connect()
    expect_error(c, "INSERT INTO test.orders VALUES (1), (2), (1)", "Duplicate entry")
    assert _count(server, "test.orders") == 0
    assert _count(server) == 0
    query(c, "INSERT INTO test.orders VALUES (1), (2)")
    assert [r[0] for r in server.sql("SELECT v FROM test.q")] == [1, 2]


def test_a_delete_beside_a_failing_innodb_statement_is_taken_back(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.done (v INT PRIMARY KEY) ENGINE=InnoDB")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    server.sql("CREATE TRIGGER test.consume AFTER INSERT ON test.done FOR EACH ROW DELETE FROM test.q WHERE v = NEW.v")
    c = server.connect()
    expect_error(c, "INSERT INTO test.done VALUES (1), (1)", "Duplicate entry")
    assert sorted(r[0] for r in server.sql("SELECT v FROM test.q")) == [1, 2]
    query(c, "INSERT INTO test.done VALUES (1)")
    assert [r[0] for r in server.sql("SELECT v FROM test.q")] == [2]


def test_an_autocommit_insert_is_there_for_others_once_it_returns(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c, other = server.connect(), server.connect()
    for i in range(1, 4):
        query(c, "INSERT INTO test.q VALUES (%s)", (i,))
        assert value(other, "SELECT COUNT(*) FROM test.q") == i
    assert value(other, "SELECT v FROM test.q WHERE queue_wait('test.q', 0)") == 1
    assert value(other, "SELECT queue_end()") == 1
