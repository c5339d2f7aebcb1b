"""INSERT forms, COUNT(*), SELECT, DELETE (never another connection's owned row)."""
from sqlcheck import query, value


def _queue(server, n=0):
    server.sql("CREATE TABLE test.q (v INT, s VARCHAR(20)) ENGINE=QUEUE")
    if n:
        server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i}, 's{i}')" for i in range(1, n + 1)))


def test_single_and_multi_row_insert_keep_order(server):
    _queue(server)
    server.sql("INSERT INTO test.q VALUES (1, 'a')")
    server.sql("INSERT INTO test.q VALUES (2, 'b'), (3, 'c'), (4, NULL)")
    server.sql("INSERT INTO test.q (s, v) VALUES ('e', 5)")
    server.sql("INSERT INTO test.q (v) VALUES (6)")
    assert server.sql("SELECT v, s FROM test.q") == [
        (1, "a"), (2, "b"), (3, "c"), (4, None), (5, "e"), (6, None)]
    assert server.value("SELECT COUNT(*) FROM test.q") == 6


def test_insert_affected_rows(server):
    _queue(server)
    c = server.connect()
    with c.cursor() as cur:
        assert cur.execute("INSERT INTO test.q VALUES (1, 'a'), (2, 'b'), (3, 'c')") == 3


def test_big_multi_row_insert(server):
    _queue(server)
    server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i}, 'r{i}')" for i in range(5000)))
    assert server.value("SELECT COUNT(*) FROM test.q") == 5000
    assert server.sql("SELECT MIN(v), MAX(v), SUM(v) FROM test.q") == [(0, 4999, sum(range(5000)))]


def test_insert_select_from_queue_and_innodb(server):
    _queue(server, 3)
    server.sql("CREATE TABLE test.src (v INT, s VARCHAR(20)) ENGINE=InnoDB")
    server.sql("INSERT INTO test.src VALUES (10, 'x'), (11, 'y')")
    server.sql("CREATE TABLE test.q2 (v INT, s VARCHAR(20)) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q2 SELECT * FROM test.q")
    server.sql("INSERT INTO test.q2 SELECT * FROM test.src ORDER BY v")
    assert server.sql("SELECT v FROM test.q2") == [(1,), (2,), (3,), (10,), (11,)]
    # a queue table into itself: reads the rows that existed when the statement began
    server.sql("INSERT INTO test.q SELECT v + 100, s FROM test.q")
    assert server.sql("SELECT v FROM test.q") == [(1,), (2,), (3,), (101,), (102,), (103,)]


def test_load_data_local_infile(server, tmp_path):
    _queue(server)
    f = tmp_path / "rows.tsv"
    f.write_text("".join(f"{i}\tline{i}\n" for i in range(100)))
    c = server.connect(local_infile=True)
    query(c, f"LOAD DATA LOCAL INFILE '{f}' INTO TABLE test.q")
    assert server.value("SELECT COUNT(*) FROM test.q") == 100
    assert server.sql("SELECT v, s FROM test.q LIMIT 2") == [(0, "line0"), (1, "line1")]


def test_prepared_insert(server):
    _queue(server)
    c = server.connect()
    query(c, "PREPARE ins FROM 'INSERT INTO test.q VALUES (?, ?)'")
    for i in range(3):
        query(c, f"SET @v = {i}, @s = 'p{i}'")
        query(c, "EXECUTE ins USING @v, @s")
    assert server.sql("SELECT v, s FROM test.q") == [(0, "p0"), (1, "p1"), (2, "p2")]


def test_select_where_order_limit_join(server):
    _queue(server, 10)
    server.sql("CREATE TABLE test.names (v INT, name TEXT) ENGINE=InnoDB")
    server.sql("INSERT INTO test.names VALUES (2, 'two'), (3, 'three')")
    assert server.sql("SELECT v FROM test.q WHERE v % 3 = 0") == [(3,), (6,), (9,)]
    assert server.sql("SELECT v FROM test.q ORDER BY v DESC LIMIT 2") == [(10,), (9,)]
    assert server.sql("SELECT q.v, n.name FROM test.q q JOIN test.names n USING (v) ORDER BY v") == [
        (2, "two"), (3, "three")]
    assert server.value("SELECT COUNT(*) FROM test.q WHERE v > 5") == 5


def test_delete_where_and_limit(server):
    _queue(server, 10)
    c = server.connect()
    with c.cursor() as cur:
        assert cur.execute("DELETE FROM test.q WHERE v > 8") == 2
        assert cur.execute("DELETE FROM test.q LIMIT 3") == 3
    assert server.sql("SELECT v FROM test.q") == [(4,), (5,), (6,), (7,), (8,)]
    assert server.value("SELECT COUNT(*) FROM test.q") == 5
    server.sql("DELETE FROM test.q")
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_deleted_rows_are_not_handed_out(server):
    _queue(server, 4)
    server.sql("DELETE FROM test.q WHERE v IN (1, 3)")
    got = []
    c = server.connect()
    while value(c, "SELECT queue_wait('test.q', 0)") == 1:
        got.append(value(c, "SELECT v FROM test.q"))
    assert got == [2, 4]


def test_count_is_per_connection(server):
    _queue(server, 5)
    owner = server.connect()
    other = server.connect()
    assert value(owner, "SELECT queue_wait('test.q', 0)") == 1
    assert value(owner, "SELECT COUNT(*) FROM test.q") == 1  # sees only its owned row
    assert value(other, "SELECT COUNT(*) FROM test.q") == 4  # never sees owned rows
    assert value(other, "SELECT COUNT(*) FROM test.q WHERE v >= 1") == 4
    assert value(owner, "SELECT queue_abort()") == 1
    assert value(owner, "SELECT COUNT(*) FROM test.q") == 5
    assert value(other, "SELECT COUNT(*) FROM test.q") == 5


def test_delete_never_removes_a_row_owned_by_another_connection(server):
    _queue(server, 5)
    owner = server.connect()
    other = server.connect()
    assert value(owner, "SELECT queue_wait('test.q', 0)") == 1
    owned = query(owner, "SELECT v, s FROM test.q")
    assert owned == [(1, "s1")]
    with other.cursor() as cur:
        assert cur.execute("DELETE FROM test.q") == 4
        assert cur.execute("DELETE FROM test.q WHERE v = 1") == 0
    assert query(owner, "SELECT v, s FROM test.q") == owned
    assert value(owner, "SELECT queue_abort()") == 1
    assert query(other, "SELECT v, s FROM test.q") == owned


def test_delete_by_the_owner_removes_its_row(server):
    _queue(server, 3)
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('test.q', 0)") == 1
    with owner.cursor() as cur:
        assert cur.execute("DELETE FROM test.q") == 1  # it only sees its own row
    assert server.sql("SELECT v FROM test.q") == [(2,), (3,)]


def test_retention_recipe_an_event_deletes_old_rows_but_not_owned_ones(server):
    """docs/sql-api.md "Retention": a scheduled DELETE on a created-at column expires old
    messages; a row a consumer owns is left to it."""
    from sqlcheck import wait_until
    server.sql("CREATE TABLE test.q (v INT, created TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1, NOW() - INTERVAL 2 DAY), (2, NOW() - INTERVAL 2 DAY), (3, NOW())")
    owner = server.connect()
    assert query(owner, "SELECT v FROM q WHERE queue_wait('q', 0)") == [(1,)]
    server.sql("SET GLOBAL event_scheduler = ON")
    server.sql("CREATE EVENT test.q_retention ON SCHEDULE EVERY 1 SECOND "
               "DO DELETE FROM test.q WHERE created < NOW() - INTERVAL 1 DAY")
    wait_until(lambda: server.value("SELECT COUNT(*) FROM test.q") == 1, what="the event's DELETE")
    server.sql("DROP EVENT test.q_retention")
    server.sql("SET GLOBAL event_scheduler = OFF")
    assert server.sql("SELECT v FROM test.q") == [(3,)]  # 2 expired; 1 is owned, so not visible here
    assert value(owner, "SELECT queue_end()") == 1     # the owner finishes its old row
    assert server.sql("SELECT v FROM test.q") == [(3,)]
