"""A replica of QUEUE tables, over real MariaDB replication (a primary and a replica on
127.0.0.1): what docs/replication.md states. Consuming a row is not in the binary log, so the
replica keeps every consumed row; an INSERT's rows appear only after its binlog write, so no
DELETE of a row reaches the log before its INSERT (tests/integration/test_binlog.py checks what
is logged)."""
import pymysql
import pytest

from replication_pair import Pair
from sqlcheck import Background, query, value, wait_until

@pytest.fixture(scope="module")
def pair(server_factory):
    p = Pair(server_factory)
    yield p
    p.destroy()


def rows(server, table):
    return [r[0] for r in server.sql(f"SELECT id FROM test.{table}")]


@pytest.mark.parametrize("binlog_format", ["ROW", "MIXED"])
def test_a_replica_keeps_every_row_consumed_on_the_primary(pair, binlog_format):
    table = f"jobs_{binlog_format.lower()}"
    producer = pair.primary.connect()
    consumer = pair.primary.connect()
    for c in (producer, consumer):
        query(c, "SET SESSION binlog_format = %s", (binlog_format,))
    query(producer, f"CREATE TABLE {table} (id INT NOT NULL) ENGINE=QUEUE")
    query(producer, f"INSERT INTO {table} VALUES (1), (2), (3), (4)")
    for expected in (1, 2, 3):  # each wait ends the row before
        assert query(consumer, f"SELECT id FROM {table} WHERE queue_wait('{table}', 0)") == [(expected,)]
    assert value(consumer, "SELECT queue_end()") == 1
    query(producer, f"DELETE FROM {table} WHERE id = 4")  # a DELETE replicates
    query(producer, f"INSERT INTO {table} VALUES (5)")
    pair.sync()
    assert rows(pair.primary, table) == [5]
    assert rows(pair.replica, table) == [1, 2, 3, 5]  # consumed on the primary, still queued here


def test_a_read_only_replica_applies_rows_and_refuses_consumers(pair):
    """The applier is exempt from read_only; a consumer on the replica is refused
    (tests/integration/test_read_only.py has the single-server cases)."""
    pair.primary.sql("CREATE TABLE test.ro_jobs (id INT NOT NULL) ENGINE=QUEUE")
    pair.primary.sql("CREATE USER repl_worker@localhost IDENTIFIED BY 'pw'")  # replicates
    pair.primary.sql("GRANT SELECT, DELETE ON test.* TO repl_worker@localhost")
    pair.replica.sql("SET GLOBAL read_only = 1")
    try:
        pair.primary.sql("INSERT INTO test.ro_jobs VALUES (1), (2)")
        pair.sync()
        assert rows(pair.replica, "ro_jobs") == [1, 2]
        c = pymysql.connect(unix_socket=str(pair.replica.socket), user="repl_worker", password="pw",
                            database="test", connect_timeout=10, read_timeout=60, autocommit=True)
        try:
            with pytest.raises(pymysql.err.OperationalError) as e:
                query(c, "SELECT queue_wait('ro_jobs', 0)")
            assert e.value.args[0] == 1290 and "test.ro_jobs" in e.value.args[1], e.value.args
        finally:
            c.close()
        assert rows(pair.replica, "ro_jobs") == [1, 2]
    finally:
        pair.replica.sql("SET GLOBAL read_only = 0")
        pair.primary.sql("DROP USER repl_worker@localhost")


@pytest.mark.parametrize("binlog_format", ["ROW", "MIXED"])
def test_a_row_is_visible_only_after_its_insert_reached_the_binary_log(pair, binlog_format):
    """Row 1 of `INSERT (1), (2)` is written while the statement still runs (a trigger holds it
    at row 2). With the binary log on the rows wait for the statement's commit, after its binlog
    write: a DELETE meanwhile finds nothing, so no DELETE of a row can reach the binlog before
    its INSERT. (Before, row 1 was visible at once and the DELETE was logged first: a ROW-format
    replica stopped with error 1032, a MIXED one kept the row.)"""
    table = f"raced_{binlog_format.lower()}"
    admin = pair.primary.connect()
    query(admin, f"CREATE TABLE {table} (id INT NOT NULL) ENGINE=QUEUE")
    query(admin, f"CREATE TRIGGER {table}_hold BEFORE INSERT ON {table} FOR EACH ROW "
                 "BEGIN IF NEW.id = 2 THEN DO GET_LOCK('hold', 120); DO RELEASE_LOCK('hold'); END IF; END")
    assert value(admin, "SELECT GET_LOCK('hold', 0)") == 1
    producer = pair.primary.connect()
    deleter = pair.primary.connect()
    for c in (producer, deleter):
        query(c, "SET SESSION binlog_format = %s", (binlog_format,))
    insert = Background(query, producer, f"INSERT INTO {table} VALUES (1), (2)")
    wait_until(lambda: value(admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                                    f"WHERE ID = {producer.thread_id()} AND STATE = 'User lock'") == 1,
               what="the INSERT to wait at row 2")
    assert value(deleter, f"SELECT COUNT(*) FROM {table}") == 0
    query(deleter, f"DELETE FROM {table} WHERE id = 1")
    assert value(deleter, "SELECT ROW_COUNT()") == 0
    assert value(admin, "SELECT RELEASE_LOCK('hold')") == 1
    insert.join()
    assert rows(pair.primary, table) == [1, 2]
    pair.sync()
    assert rows(pair.replica, table) == [1, 2]
    assert pair.status()["Slave_SQL_Running"] == "Yes"


def test_a_replica_that_installed_queue_at_run_time_stops_with_the_fix_named(server_factory):
    """Without the binary log, QUEUE installed at run time gets no two-phase commit; the
    replica's applier writes each event in a transaction with its InnoDB GTID position, so it
    stops with an error that says what to do, instead of applying non-atomically."""
    p = Pair(server_factory, replica_at_startup=False)
    try:
        p.primary.sql("CREATE TABLE test.rt (id INT NOT NULL) ENGINE=QUEUE")
        p.sync()
        p.primary.sql("INSERT INTO test.rt VALUES (1)")
        st = p.wait_stopped()
        assert st["Last_SQL_Errno"] == 1235, st
        assert "installed while the server ran" in st["Last_SQL_Error"], st
        assert "Restart the server" in st["Last_SQL_Error"], st
        assert rows(p.replica, "rt") == []
    finally:
        p.destroy()
