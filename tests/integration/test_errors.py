"""The error table of docs/sql-api.md, and bad input that must never crash the server."""
import pymysql
import pytest

from sqlcheck import expect_error, sql_error


@pytest.fixture
def q(server):
    server.sql("CREATE TABLE test.q (v INT, prio INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.inno (v INT) ENGINE=InnoDB")
    return server.connect()


def test_table_does_not_exist(q):
    expect_error(q, "SELECT queue_wait('nosuch', 0)",
                 "queue_wait(): argument 1: table 'test.nosuch' does not exist")
    expect_error(q, "SELECT queue_wait('test.q', 'other.nosuch', 0)",
                 "queue_wait(): argument 2: table 'other.nosuch' does not exist")


def test_not_a_queue_table(q):
    _, msg = expect_error(q, "SELECT queue_wait('inno', 0)", "is not a QUEUE table", "test.inno")
    assert "queue_wait()" in msg and "argument 1" in msg


def test_quoted_table_names(server, q):
    """A table argument's database and table may be `quoted` (docs/sql-api.md): names with ':',
    '.' or a backquote in them, which unquoted read as a condition or a database."""
    server.sql("CREATE DATABASE `odd.db`")
    server.sql("CREATE TABLE `odd.db`.`t:x` (v INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.`a``b` (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO `odd.db`.`t:x` VALUES (1), (2)")
    server.sql("INSERT INTO test.`a``b` VALUES (3)")
    with q.cursor() as cur:
        cur.execute("SELECT JSON_VALUE(queue_stats('`odd.db`.`t:x`'), '$.rows'), "
                    "JSON_VALUE(queue_stats('test.`a``b`'), '$.rows'), JSON_VALUE(queue_stats('`a``b`'), '$.rows')")
        assert cur.fetchone() == ("2", "1", "1")
        cur.execute("SELECT v FROM `odd.db`.`t:x` WHERE queue_wait('`odd.db`.`t:x`:v = 2', 0)")
        assert cur.fetchall() == ((2,),)
        cur.execute("SELECT queue_end()")
    expect_error(q, "SELECT queue_wait('odd.db.t:x', 0)", "table 'odd.db.t' does not exist")
    expect_error(q, "SELECT queue_stats('`odd.db')", "'`odd.db' is not a table name (a ` is left open)")
    expect_error(q, "SELECT queue_stats('`test`q')", "'`test`q' is not a table name (unexpected text after a name)")
    expect_error(q, "SELECT queue_stats('`test`.`q`:v > 1')", "a condition is only allowed in queue_wait()")


@pytest.mark.parametrize("timeout", ["-1", "-0.5", "NULL"])
def test_invalid_timeout(q, timeout):
    expect_error(q, f"SELECT queue_wait('q', {timeout})", "queue_wait(): argument 2: invalid timeout")


def test_number_before_the_last_argument(q):
    expect_error(q, "SELECT queue_wait('q', 1, 'q')",
                 "queue_wait(): argument 2:", "only the last argument may be a timeout")


@pytest.mark.parametrize("call", ["queue_wait()", "queue_wait(5)"])
def test_no_table_given(q, call):
    expect_error(q, f"SELECT {call}", "queue_wait(): at least one table is required")


@pytest.mark.parametrize("fn", ["queue_end", "queue_abort"])
def test_end_or_abort_outside_owner_mode(q, fn):
    expect_error(q, f"SELECT {fn}()", f"{fn}(): this connection does not own a row")


@pytest.mark.parametrize("call,text", [
    ("queue_end(1)", "queue_end() takes no arguments"),
    ("queue_abort(1, 2)", "queue_abort() takes 0 or 1 argument (a delay in seconds before the row is handed out again)"),
    ("queue_rowid(1)", "queue_rowid() takes no arguments"),
    ("queue_stats()", "queue_stats() takes 1 argument (the table)"),
    ("queue_compact('q', 'q')", "queue_compact() takes 1 argument (the table)"),
    ("queue_set_srcid(1)", "queue_set_srcid() takes 3 to 10002 arguments (source_id, mode, rowid [, rowid ...])"),
])
def test_functions_given_arguments_they_do_not_take(q, call, text):
    # the standard wrong-argument-count error code (1582) with a text that says what is expected
    code, msg = expect_error(q, f"SELECT {call}", text)
    assert code == 1582, (code, msg)


def test_condition_syntax_error(q):
    _, msg = expect_error(q, "SELECT queue_wait('q:prio >', 0)", "syntax error at position")
    assert "q" in msg


def test_condition_unknown_column(q):
    _, msg = sql_error(q, "SELECT queue_wait('q:nosuchcol > 1', 0)")
    assert "nosuchcol" in msg


@pytest.mark.parametrize("call", ["queue_compact('nosuch')", "queue_stats('nosuch')"])
def test_maintenance_functions_name_the_missing_table(q, call):
    expect_error(q, f"SELECT {call}", "test.nosuch", "does not exist")


def test_set_srcid_bad_mode(q):
    sql_error(q, "SELECT queue_set_srcid(1, 'x', 5)")


def test_errors_do_not_change_owner_state(server, q):
    server.sql("INSERT INTO test.q VALUES (1, 1)")
    with q.cursor() as cur:
        cur.execute("SELECT queue_wait('q', 0)")
        assert cur.fetchone()[0] == 1
    sql_error(q, "SELECT queue_wait('nosuch', 0)")
    with q.cursor() as cur:
        cur.execute("SELECT v FROM q")
        assert cur.fetchall() == ((1,),)


BAD_INPUTS = [
    "SELECT queue_wait(NULL)", "SELECT queue_wait(NULL, 0)", "SELECT queue_wait('', 0)",
    "SELECT queue_wait('.', 0)", "SELECT queue_wait('test.', 0)", "SELECT queue_wait('.q', 0)",
    "SELECT queue_wait('a.b.c', 0)", "SELECT queue_wait(':', 0)", "SELECT queue_wait('q:', 0)",
    "SELECT queue_wait('q:)', 0)", "SELECT queue_wait('q:((((((((((', 0)",
    "SELECT queue_wait(CONCAT('q:', REPEAT('(', 100000)), 0)",
    "SELECT queue_wait(CONCAT('q:', REPEAT('v+', 100000), '1'), 0)",
    "SELECT queue_wait(CONCAT('q:', REPEAT('not ', 50000), '1'), 0)",
    "SELECT queue_wait('q:v/0 = 1', 0)", "SELECT queue_wait('q:v%0 = 1', 0)",
    "SELECT queue_wait('q:9223372036854775807 + 1 > 0', 0)",
    "SELECT queue_wait('q:-9223372036854775808 / -1 > 0', 0)",
    "SELECT queue_wait('q:v << 200 > 0', 0)", "SELECT queue_wait('q:v = 99999999999999999999999', 0)",
    "SELECT queue_wait('q:\\'unterminated', 0)", "SELECT queue_wait('q:v = \\'\\'', 0)",
    "SELECT queue_wait(REPEAT('x', 70000), 0)", "SELECT queue_wait(CONCAT(REPEAT('d', 300), '.q'), 0)",
    "SELECT queue_wait('q', 1e300)", "SELECT queue_wait('q', -1e300)", "SELECT queue_wait('q', 'abc')",
    "SELECT queue_wait('q', 0.0000001)", "SELECT queue_wait('q', 18446744073709551615)",
    "SELECT queue_wait('q', CAST('nan' AS DOUBLE))", "SELECT queue_wait(1, 2, 3)",
    "SELECT queue_wait('q', NOW())", "SELECT queue_wait(x'00ff', 0)",
    "SELECT queue_wait(" + ", ".join(["'q'"] * 300) + ", 0)",
    "SELECT queue_wait('q', 'q', 'q', 'q', 'inno', 0)",
    "SELECT queue_wait('information_schema.tables', 0)", "SELECT queue_wait('mysql.user', 0)",
    "SELECT queue_rowid(NULL)", "SELECT queue_end(NULL)", "SELECT queue_abort(NULL, NULL)",
    "SELECT queue_compact(NULL)", "SELECT queue_compact('')", "SELECT queue_compact('inno')",
    "SELECT queue_compact()", "SELECT queue_compact('q', 'q')",
    "SELECT queue_stats(NULL)", "SELECT queue_stats()", "SELECT queue_stats('inno')",
    "SELECT queue_set_srcid(NULL, NULL, NULL)", "SELECT queue_set_srcid(-1, 'a', -5)",
    "SELECT queue_set_srcid(1, 'a')", "SELECT queue_set_srcid()", "SELECT queue_set_srcid('x', 'a', 'y')",
    "SELECT queue_set_srcid(99999999999, 'a', 18446744073709551615)",
    "SELECT queue_set_srcid(1, '', 1)", "SELECT queue_set_srcid(1, 'aw', 1)",
    "SELECT queue_wait('q', 0) FROM test.inno",
    "SELECT queue_end() FROM test.q",
    "SELECT * FROM test.q WHERE queue_wait('q', 0) AND queue_wait('q', 0)",
    "SELECT queue_wait(v, 0) FROM test.inno",
    "UPDATE test.q SET v = 1 WHERE queue_wait('q', 0)",
    "DELETE FROM test.q WHERE queue_wait('q', 0)",
    "INSERT INTO test.q SELECT queue_wait('q', 0), queue_rowid()",
    "SELECT queue_wait('q', 0) UNION SELECT queue_wait('q', 0)",
    "CREATE TABLE test.bad (v INT) ENGINE=QUEUE PARTITION BY HASH (v) PARTITIONS 2",
    "CREATE TABLE test.bad2 (v INT AS (1) VIRTUAL, w INT) ENGINE=QUEUE",
    "LOCK TABLES test.q WRITE", "UNLOCK TABLES",
    "HANDLER test.q OPEN", "HANDLER q READ FIRST", "HANDLER q CLOSE",
    "CHECK TABLE test.q", "REPAIR TABLE test.q", "OPTIMIZE TABLE test.q", "ANALYZE TABLE test.q",
    "CHECKSUM TABLE test.q", "FLUSH TABLES test.q", "FLUSH TABLES test.q FOR EXPORT", "UNLOCK TABLES",
    "SELECT * FROM test.q FOR UPDATE", "SELECT * FROM test.q LOCK IN SHARE MODE",
    "XA START 'x'", "INSERT INTO test.q VALUES (1, 1)", "XA END 'x'", "XA PREPARE 'x'", "XA COMMIT 'x'",
]


def test_bad_input_never_crashes_the_server(server, q):
    # enough rows that no statement with a long timeout ever blocks
    server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i}, {i})" for i in range(500)))
    server.sql("INSERT INTO test.inno VALUES (1)")
    for stmt in BAD_INPUTS:
        try:
            with q.cursor() as cur:
                cur.execute(stmt)
                cur.fetchall()
        except pymysql.MySQLError:
            if not q.open:
                q = server.connect()
        server.check_alive(f"after {stmt!r}")
        assert server.value("SELECT 1") == 1, stmt
    server.sql("SELECT queue_rowid()")
