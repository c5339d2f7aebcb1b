"""User XA (docs/transactions.md): XA START / END / PREPARE / COMMIT / ROLLBACK / RECOVER with
QUEUE tables, a prepared transaction surviving its connection and a crash."""
from sqlcheck import query, value, wait_until


def _tables(s):
    s.sql("CREATE TABLE test.q (id INT) ENGINE=QUEUE")
    s.sql("CREATE TABLE test.orders (id INT PRIMARY KEY) ENGINE=InnoDB")


def _prepare(c, xid, order_id):
    query(c, f"XA START '{xid}'")
    query(c, f"INSERT INTO orders VALUES ({order_id})")
    query(c, f"INSERT INTO q VALUES ({order_id})")
    query(c, f"XA END '{xid}'")
    query(c, f"XA PREPARE '{xid}'")


def _detach(s, c):
    """Closes c, which has a prepared XA transaction, and waits until the server detached it: until
    then (the session's cleanup) XA RECOVER lists it but XA COMMIT / ROLLBACK from another
    connection answer XAER_NOTA (the xid is still the closing session's). The session leaves the
    processlist after its cleanup."""
    conn_id = c.thread_id()
    c.close()
    wait_until(lambda: s.value("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (conn_id,)) == 0,
               what=f"connection {conn_id} to be gone")


def _recovered(s):
    return sorted(bytes(row[3]).decode() for row in s.sql("XA RECOVER"))


def test_xa_commit_and_rollback_on_the_same_connection(server):
    _tables(server)
    c = server.connect()
    _prepare(c, "x1", 1)
    assert server.value("SELECT COUNT(*) FROM test.q") == 0  # prepared: not yet there
    query(c, "XA COMMIT 'x1'")
    _prepare(c, "x2", 2)
    query(c, "XA ROLLBACK 'x2'")
    assert server.sql("SELECT id FROM test.q") == [(1,)]
    assert server.sql("SELECT id FROM test.orders") == [(1,)]


def test_a_prepared_transaction_survives_its_connection_and_is_committed_from_another(server):
    _tables(server)
    c = server.connect()
    _prepare(c, "detached", 3)
    _detach(server, c)
    assert _recovered(server) == ["detached"]
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    other = server.connect()
    query(other, "XA COMMIT 'detached'")
    assert server.sql("SELECT id FROM test.q") == [(3,)]
    assert server.sql("SELECT id FROM test.orders") == [(3,)]
    assert _recovered(server) == []


def test_a_prepared_consume_holds_its_row_until_xa_rollback(server):
    _tables(server)
    server.sql("INSERT INTO test.q VALUES (9)")
    c, other = server.connect(), server.connect()
    query(c, "XA START 'take'")
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    query(c, "XA END 'take'")
    query(c, "XA PREPARE 'take'")
    _detach(server, c)
    assert value(other, "SELECT queue_wait('q', 0)") == 0  # held by the prepared transaction
    value(other, "SELECT queue_end()")
    query(other, "XA ROLLBACK 'take'")
    assert value(other, "SELECT queue_wait('q', 0)") == 1
    assert value(other, "SELECT queue_delivery_count()") == 2


def test_a_prepared_transaction_survives_a_crash(server_factory):
    s = server_factory.new(extra_args=["--log-bin=mysql-bin", "--server-id=1"], at_startup=True)
    try:
        _tables(s)
        s.sql("INSERT INTO test.q VALUES (100)")
        c = s.connect()
        _prepare(c, "kept", 5)
        c2 = s.connect()
        query(c2, "XA START 'consumed'")
        assert value(c2, "SELECT queue_wait('q', 0)") == 1
        assert value(c2, "SELECT queue_end()") == 1
        query(c2, "XA END 'consumed'")
        query(c2, "XA PREPARE 'consumed'")
        s.kill9()
        s.start()
        assert _recovered(s) == ["consumed", "kept"]
        assert s.value("SELECT COUNT(*) FROM test.q") == 0  # 100 held, 5 not yet in
        c = s.connect()
        assert value(c, "SELECT queue_wait('q', 0)") == 0
        value(c, "SELECT queue_end()")
        query(c, "XA COMMIT 'kept'")
        query(c, "XA COMMIT 'consumed'")
        assert s.sql("SELECT id FROM test.q") == [(5,)]
        assert s.sql("SELECT id FROM test.orders") == [(5,)]
        s.restart()  # a clean restart after: nothing prepared is left
        assert _recovered(s) == []
        assert s.sql("SELECT id FROM test.q") == [(5,)]
    finally:
        s.destroy()


def test_ddl_that_would_lose_a_prepared_transaction_is_refused(server):
    from sqlcheck import expect_error
    _tables(server)
    c = server.connect()
    _prepare(c, "pending", 1)
    _detach(server, c)
    other = server.connect()
    expect_error(other, "TRUNCATE TABLE q", "prepared transaction", "XA COMMIT or XA ROLLBACK")
    expect_error(other, "DROP TABLE q", "prepared transaction", "XA COMMIT or XA ROLLBACK")
    query(other, "XA ROLLBACK 'pending'")
    query(other, "TRUNCATE TABLE q")
