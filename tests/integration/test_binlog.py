"""QUEUE tables on a server with the binary log on: their rows are logged as rows (ROW and MIXED
format; STATEMENT is refused, as for sequences: a statement like DELETE ... LIMIT 1 could pick
other rows on a replica), DDL as statements, without "unsafe statement" warnings; consuming a
row (queue_wait, queue_end) is not logged at all. docs/replication.md states this contract."""
import pymysql
import pytest

ER_BINLOG_STMT_MODE_AND_ROW_ENGINE = 1665


def binlog_position(cur):
    cur.execute("SHOW MASTER STATUS")
    row = cur.fetchone()
    return row[0], row[1]


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
    assert [t for t, _ in events].count("Delete_rows_v1") == 1, text
    statements = [info for t, info in events if t == "Query"]
    assert not [q for q in statements if "INSERT INTO bq" in q or "DELETE FROM bq" in q], text


def test_consuming_writes_nothing_to_the_binlog(binlog_server):
    s = binlog_server
    cur = s.connect().cursor()
    cur.execute("DROP TABLE IF EXISTS cq")
    cur.execute("CREATE TABLE cq (id INT NOT NULL) ENGINE=QUEUE")
    cur.execute("INSERT INTO cq VALUES (1),(2),(3)")
    before = binlog_position(cur)
    cur.execute("SELECT id FROM cq WHERE queue_wait('cq', 1)")
    assert cur.fetchall() == ((1,),)
    cur.execute("SELECT id FROM cq WHERE queue_wait('cq', 1)")  # ends row 1, takes row 2
    assert cur.fetchall() == ((2,),)
    cur.execute("SELECT queue_abort()")
    cur.execute("SELECT id FROM cq WHERE queue_wait('cq', 1)")
    assert cur.fetchall() == ((2,),)
    cur.execute("SELECT queue_end()")
    assert binlog_position(cur) == before, binlog_events(cur, before)
    cur.execute("SELECT id FROM cq")
    assert cur.fetchall() == ((3,),)  # consumed here, but a replica would still hold 1, 2 and 3


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
        cur.execute("SELECT id FROM sq WHERE queue_wait('sq', 0)")  # consuming logs nothing
        assert cur.fetchall() == ((1,),)
        cur.execute("SELECT queue_end()")
        cur.execute("TRUNCATE TABLE sq")
        cur.execute("ALTER TABLE sq ADD COLUMN v INT")
    finally:
        s.destroy()
