"""Privileges of the queue functions (docs/sql-api.md, "Privileges"), checked as real
unprivileged users: consuming needs DELETE and SELECT, a condition needs SELECT on every
column it reads (as a WHERE does), queue_compact needs SELECT and INSERT."""
import itertools

import pymysql
import pytest

from sqlcheck import expect_error, query, value

ER_TABLEACCESS_DENIED_ERROR = 1142
ER_COLUMNACCESS_DENIED_ERROR = 1143

_names = itertools.count(1)


class Users:
    """Creates users (and roles) on the server; drops them all at teardown."""

    def __init__(self, server):
        self.server, self.created, self.conns = server, [], []

    def create(self, *grants, role=None):
        name = f"priv_user{next(_names)}"
        self.server.sql(f"CREATE USER {name}@localhost IDENTIFIED BY 'pw'")
        self.created.append(f"USER {name}@localhost")
        for g in grants:
            self.server.sql(f"GRANT {g} TO {name}@localhost")
        if role:
            self.server.sql(f"GRANT {role} TO {name}@localhost")
        return name

    def create_role(self, *grants):
        name = f"priv_role{next(_names)}"
        self.server.sql(f"CREATE ROLE {name}")
        self.created.append(f"ROLE {name}")
        for g in grants:
            self.server.sql(f"GRANT {g} TO {name}")
        return name

    def connect(self, name):
        c = pymysql.connect(unix_socket=str(self.server.socket), user=name, password="pw", database="test",
                            connect_timeout=10, read_timeout=60, autocommit=True)
        self.conns.append(c)
        return c

    def drop_all(self):
        for c in self.conns:
            c.close()
        for what in self.created:
            self.server.sql(f"DROP {what}")


@pytest.fixture
def users(server):
    u = Users(server)
    yield u
    u.drop_all()


@pytest.fixture
def q(server):
    """test.q with rows id=1..4 and secret=id*10."""
    server.sql("CREATE TABLE test.q (id INT, secret INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1, 10), (2, 20), (3, 30), (4, 40)")
    return server


def _rows(server):
    return server.value("SELECT COUNT(*) FROM test.q")


# ---- conditions: SELECT on every column they read --------------------------------------

@pytest.mark.parametrize("condition", ["secret > 5", "id > 0 AND secret > 5", "id = 1 OR secret IS NULL",
                                       "SECRET = 10"])
def test_a_condition_on_a_column_the_user_may_not_read_is_refused(q, users, condition):
    c = users.connect(users.create("SELECT (id), DELETE ON test.q"))
    # What SQL says about the same column in a WHERE: the queue functions answer alike.
    expect_error(c, "DELETE FROM q WHERE secret > 5", code=ER_COLUMNACCESS_DENIED_ERROR)
    expect_error(c, f"SELECT queue_wait('test.q:{condition}', 0)", "queue_wait(): argument 1:",
                 "column 'secret'", "table 'test.q'", "SELECT command denied", code=ER_COLUMNACCESS_DENIED_ERROR)
    expect_error(c, "SELECT queue_end()", "does not own a row")
    assert _rows(q) == 4


def test_an_unreadable_column_is_refused_before_its_type_shows(q, users):
    q.sql("CREATE TABLE test.t (id INT, price DECIMAL(6,2)) ENGINE=QUEUE")
    c = users.connect(users.create("SELECT (id), DELETE ON test.t"))
    _, msg = expect_error(c, "SELECT queue_wait('t:price > 1', 0)", "column 'price'",
                          code=ER_COLUMNACCESS_DENIED_ERROR)
    assert "DECIMAL" not in msg.upper()
    # With the privilege the user learns why the condition cannot be used.
    c = users.connect(users.create("SELECT, DELETE ON test.t"))
    expect_error(c, "SELECT queue_wait('t:price > 1', 0)", "column 'price'", code=1210)


def test_the_refusal_does_not_depend_on_the_rows(q, users):
    """Whether any row matches must not show: the answer is the same error either way."""
    c = users.connect(users.create("SELECT (id), DELETE ON test.q"))
    for condition in ("secret = 10", "secret = 11", "secret > 1000"):
        expect_error(c, f"SELECT queue_wait('test.q:{condition}', 0)", "column 'secret'",
                     code=ER_COLUMNACCESS_DENIED_ERROR)


def test_every_function_that_takes_a_condition_checks_its_columns(q, users):
    q.sql("CREATE TABLE test.other (v INT) ENGINE=QUEUE")
    c = users.connect(users.create("SELECT (id), DELETE ON test.q", "SELECT, DELETE ON test.other"))
    expect_error(c, "SELECT queue_wait('test.other', 'test.q:secret > 5', 0)", "queue_wait(): argument 2:",
                 "column 'secret'", "table 'test.q'", code=ER_COLUMNACCESS_DENIED_ERROR)
    expect_error(c, "SELECT queue_wait_batch('q:secret > 5', 10, 0)", "queue_wait_batch(): argument 1:",
                 "column 'secret'", "table 'test.q'", code=ER_COLUMNACCESS_DENIED_ERROR)
    # The statement's own table (the per-message path that skips the definition lookup).
    expect_error(c, "SELECT id FROM q WHERE queue_wait('q:secret > 5', 0)", "queue_wait(): argument 1:",
                 "column 'secret'", code=ER_COLUMNACCESS_DENIED_ERROR)
    assert _rows(q) == 4


def test_a_condition_on_readable_columns_consumes(q, users):
    c = users.connect(users.create("SELECT (id), DELETE ON test.q"))
    assert value(c, "SELECT queue_wait('test.q:id = 3', 0)") == 1
    assert query(c, "SELECT id FROM q") == [(3,)]
    assert value(c, "SELECT queue_end()") == 1
    assert query(c, "SELECT id FROM q WHERE queue_wait('q:id >= 2', 0)") == [(2,)]
    assert value(c, "SELECT queue_wait_batch('q:id > 0', 10, 0)") == 2  # consumed 2, now owns 1 and 4
    assert value(c, "SELECT queue_end()") == 1
    assert _rows(q) == 0


@pytest.mark.parametrize("grant", ["SELECT, DELETE ON test.q", "SELECT, DELETE ON test.*",
                                   "SELECT (id, secret), DELETE ON test.q", "SELECT, DELETE ON *.*"])
def test_select_on_the_columns_from_any_level_allows_the_condition(q, users, grant):
    c = users.connect(users.create(grant))
    assert value(c, "SELECT queue_wait('test.q:secret = 20', 0)") == 1
    assert query(c, "SELECT id, secret FROM q") == [(2, 20)]
    assert value(c, "SELECT queue_end()") == 1
    assert _rows(q) == 3


def test_a_column_granted_through_a_role_counts_once_the_role_is_set(q, users):
    role = users.create_role("SELECT (secret) ON test.q")
    c = users.connect(users.create("SELECT (id), DELETE ON test.q", role=role))
    expect_error(c, "SELECT queue_wait('q:secret = 10', 0)", "column 'secret'", code=ER_COLUMNACCESS_DENIED_ERROR)
    query(c, f"SET ROLE {role}")
    assert value(c, "SELECT queue_wait('q:secret = 10', 0)") == 1
    assert query(c, "SELECT id FROM q") == [(1,)]


def test_a_revoked_column_is_refused_from_the_next_call(q, users):
    name = users.create("SELECT (id, secret), DELETE ON test.q")
    c = users.connect(name)
    assert value(c, "SELECT queue_wait('q:secret = 10', 0)") == 1
    assert value(c, "SELECT queue_abort()") == 1
    q.sql(f"REVOKE SELECT (secret) ON test.q FROM {name}@localhost")
    expect_error(c, "SELECT queue_wait('q:secret = 10', 0)", "column 'secret'", code=ER_COLUMNACCESS_DENIED_ERROR)


# ---- consuming: DELETE, and SELECT on the table or some of its columns ------------------

def test_a_user_without_delete_cannot_consume(q, users):
    c = users.connect(users.create("SELECT ON test.q"))
    assert value(c, "SELECT COUNT(*) FROM q") == 4  # may read
    for call in ("queue_wait('q', 0)", "queue_wait('q:id = 1', 0)", "queue_wait_batch('q', 10, 0)",
                 "queue_take_dead('q')"):
        function = call[:call.index("(")]
        expect_error(c, f"SELECT {call}", f"{function}(): argument 1: DELETE command denied", "`test`.`q`",
                     code=ER_TABLEACCESS_DENIED_ERROR)
        # Nothing is owned, so nothing is removed by ending or by the next wait either.
        expect_error(c, "SELECT queue_end()", "does not own a row")
    expect_error(c, "SELECT id FROM q WHERE queue_wait('q', 0)", "DELETE command denied",
                 code=ER_TABLEACCESS_DENIED_ERROR)
    expect_error(c, "DELETE FROM q", "DELETE command denied", code=ER_TABLEACCESS_DENIED_ERROR)
    assert _rows(q) == 4


def test_a_user_without_any_select_cannot_consume(q, users):
    q.sql("CREATE TABLE test.other (v INT) ENGINE=QUEUE")
    c = users.connect(users.create("DELETE ON test.q", "SELECT, DELETE ON test.other"))
    for call in ("queue_wait('q', 0)", "queue_wait_batch('q', 10, 0)", "queue_take_dead('q')"):
        function = call[:call.index("(")]
        expect_error(c, f"SELECT {call}", f"{function}(): argument 1: SELECT command denied", "`test`.`q`",
                     code=ER_TABLEACCESS_DENIED_ERROR)
    expect_error(c, "SELECT queue_wait('test.other', 'q', 0)", "queue_wait(): argument 2: SELECT command denied",
                 "`test`.`q`", code=ER_TABLEACCESS_DENIED_ERROR)
    assert _rows(q) == 4


def test_column_select_and_delete_consume_whole_rows(q, users):
    """Consuming removes the whole row, as `DELETE FROM q WHERE id = ...` may with the same
    grants; the row's other columns stay unreadable."""
    c = users.connect(users.create("SELECT (id), DELETE ON test.q"))
    assert value(c, "SELECT queue_wait('test.q', 0)") == 1
    assert query(c, "SELECT id FROM q") == [(1,)]
    expect_error(c, "SELECT secret FROM q", "column 'secret'", code=ER_COLUMNACCESS_DENIED_ERROR)
    expect_error(c, "SELECT * FROM q", "SELECT command denied", code=ER_TABLEACCESS_DENIED_ERROR)
    # The owner-mode functions act on what the connection owns: no privilege of their own.
    assert value(c, "SELECT queue_rowid()") is not None
    assert value(c, "SELECT queue_renew_lease(30)") == 1
    assert value(c, "SELECT queue_abort()") == 1
    assert value(c, "SELECT queue_wait('test.q', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert _rows(q) == 3
    # The next wait consumes the row owned before (an owned row is hidden from the others).
    assert value(c, "SELECT queue_wait('test.q', 0)") == 1
    assert _rows(q) == 2
    assert value(c, "SELECT queue_wait('test.q', 0)") == 1
    assert _rows(q) == 1
    assert value(c, "SELECT queue_end()") == 1
    assert q.sql("SELECT id, secret FROM test.q") == [(4, 40)]


# ---- the other functions -------------------------------------------------------------

def test_queue_compact_needs_select_and_insert(q, users):
    without_insert = users.connect(users.create("SELECT, DELETE ON test.q"))
    expect_error(without_insert, "SELECT queue_compact('q')", "INSERT command denied",
                 code=ER_TABLEACCESS_DENIED_ERROR)
    without_select = users.connect(users.create("INSERT ON test.q"))
    expect_error(without_select, "SELECT queue_compact('q')", "SELECT command denied",
                 code=ER_TABLEACCESS_DENIED_ERROR)
    c = users.connect(users.create("SELECT, INSERT ON test.q"))
    assert value(c, "SELECT queue_compact('q')") == 1
    assert _rows(q) == 4


def test_queue_stats_needs_select(q, users):
    c = users.connect(users.create("INSERT, DELETE ON test.q"))
    expect_error(c, "SELECT queue_stats('q')", "SELECT command denied", code=ER_TABLEACCESS_DENIED_ERROR)
    c = users.connect(users.create("SELECT (id) ON test.q"))
    assert '"rows":4' in value(c, "SELECT queue_stats('q')").replace(" ", "")


def test_queue_set_srcid_needs_nothing_but_its_insert_needs_insert(q, users):
    reader = users.connect(users.create("SELECT ON test.q"))
    assert value(reader, "SELECT queue_set_srcid(1, 'a', 5)") == 1
    expect_error(reader, "INSERT INTO q VALUES (5, 50)", "INSERT command denied", code=ER_TABLEACCESS_DENIED_ERROR)
    writer = users.connect(users.create("INSERT ON test.q"))
    assert value(writer, "SELECT queue_set_srcid(1, 'a', 5)") == 1
    query(writer, "INSERT INTO q VALUES (5, 50)")
    assert _rows(q) == 5
