"""A read-only server takes no rows out of a queue (docs/replication.md): on a replica a consumer
would remove rows the primary still hands out. Same rule as the server's for DML: accounts with
READ ONLY ADMIN (root) and the replication applier are exempt."""
import pymysql
import pytest

from sqlcheck import query, value

ER_OPTION_PREVENTS_STATEMENT = 1290


@pytest.fixture
def worker(server):
    """A consumer account without READ ONLY ADMIN, and a table with rows; read_only is turned
    off again afterwards."""
    server.sql("CREATE TABLE test.ro_q (id INT NOT NULL) ENGINE=QUEUE")
    server.sql("INSERT INTO test.ro_q VALUES (1), (2), (3)")
    server.sql("CREATE USER ro_worker@localhost IDENTIFIED BY 'pw'")
    server.sql("GRANT SELECT, INSERT, DELETE ON test.* TO ro_worker@localhost")
    c = pymysql.connect(unix_socket=str(server.socket), user="ro_worker", password="pw", database="test",
                        connect_timeout=10, read_timeout=60, autocommit=True)
    try:
        yield c
    finally:
        c.close()
        server.sql("SET GLOBAL read_only = 0")
        server.sql("DROP USER ro_worker@localhost")


def _refused(c, sql):
    with pytest.raises(pymysql.err.OperationalError) as e:
        query(c, sql)
    assert e.value.args[0] == ER_OPTION_PREVENTS_STATEMENT, e.value.args
    return e.value.args[1]


def test_consuming_on_a_read_only_server_is_refused_naming_the_table(server, worker):
    server.sql("SET GLOBAL read_only = 1")
    message = _refused(worker, "SELECT queue_wait('ro_q', 0)")
    assert "queue_wait(): table 'test.ro_q'" in message and "--read-only" in message, message
    assert "queue_wait_batch()" in _refused(worker, "SELECT queue_wait_batch('ro_q', 2, 0)")
    assert "queue_take_dead()" in _refused(worker, "SELECT queue_take_dead('ro_q')")
    _refused(worker, "INSERT INTO ro_q VALUES (4)")  # the server's own rule for DML
    assert server.value("SELECT COUNT(*) FROM test.ro_q") == 3  # nothing taken, nothing added
    server.sql("SET GLOBAL read_only = 0")
    assert value(worker, "SELECT queue_wait('ro_q', 0)") == 1


def test_a_row_owned_when_the_server_turns_read_only_is_not_removed(server, worker):
    assert value(worker, "SELECT queue_wait('ro_q', 0)") == 1
    server.sql("SET GLOBAL read_only = 1")
    assert "queue_end(): table 'test.ro_q'" in _refused(worker, "SELECT queue_end()")
    server.sql("SET GLOBAL read_only = 0")
    assert value(worker, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.ro_q") == 2
    # Giving a row back changes nothing a replica would miss: allowed.
    assert value(worker, "SELECT queue_wait('ro_q', 0)") == 1
    server.sql("SET GLOBAL read_only = 1")
    assert value(worker, "SELECT queue_abort()") == 1
    assert server.value("SELECT COUNT(*) FROM test.ro_q") == 2


def test_an_account_with_read_only_admin_may_consume(server, worker):
    server.sql("SET GLOBAL read_only = 1")
    root = server.connect()
    assert value(root, "SELECT queue_wait('ro_q', 0)") == 1
    assert value(root, "SELECT queue_end()") == 1
    assert server.value("SELECT COUNT(*) FROM test.ro_q") == 2
