"""Two servers reaching one table file (here: the second server's `test` database directory
is a symlink to the first's): the second is refused with a clear error naming the file and
the holder, the first keeps working, and the file stays whole (docs/sql-api.md, "One server
per data file")."""
import os
import shutil

import pytest

from q4m_server import Server
from sqlcheck import expect_error, query, value

ER_CANT_LOCK = 1015


@pytest.fixture
def second(fresh_server, server_factory):
    """A second server whose `test` database is the first one's directory."""
    b = Server(fresh_server.root.parent / (fresh_server.root.name + "-second"), server_factory.pristine,
               plugin_dir=server_factory.plugin_dir)
    shutil.rmtree(b.datadir / "test")
    os.symlink(fresh_server.datadir / "test", b.datadir / "test")
    b.start()
    b.install_plugin()
    yield b
    b.destroy()


def _refused(conn, sql, holder):
    _, msg = expect_error(conn, sql, "q.Q4M is in use by another process", f"(pid {holder.proc.pid}, mariadbd)",
                          code=ER_CANT_LOCK)
    assert "crashed" not in msg and "corrupt" not in msg, msg
    return msg


def _ids(server):
    return [r[0] for r in server.sql("SELECT id FROM test.q")]


def _consume(conn, n):
    for _ in range(n):
        assert value(conn, "SELECT queue_wait('test.q', 0)") == 1
    assert value(conn, "SELECT queue_end()") == 1


def test_a_second_server_is_refused_and_the_file_stays_whole(fresh_server, second):
    a, b = fresh_server, second
    a.sql("CREATE TABLE test.q (id INT, msg VARCHAR(100)) ENGINE=QUEUE")
    a.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i}, 'message {i}')" for i in range(1, 101)))
    assert a.value("SELECT COUNT(*) FROM test.q") == 100

    cb = b.connect()
    msg = _refused(cb, "SELECT COUNT(*) FROM test.q", a)
    assert "QUEUE table 'test.q'" in msg, msg
    _refused(cb, "INSERT INTO test.q VALUES (1000, 'from the second server')", a)
    _refused(cb, "SELECT queue_wait('test.q', 0)", a)
    _refused(cb, "TRUNCATE TABLE test.q", a)
    _refused(cb, "ALTER TABLE test.q ADD COLUMN extra INT", a)
    # Nor may it take the file away: the table stays, definition and data.
    _refused(cb, "RENAME TABLE test.q TO test.q2", a)
    _refused(cb, "DROP TABLE test.q", a)
    assert sorted(os.listdir(a.datadir / "test")) == ["q.Q4M", "q.frm"]

    # The first server goes on: inserts, consumes, compacts.
    ca = a.connect()
    a.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i}, 'message {i}')" for i in range(101, 151)))
    _consume(ca, 10)
    assert value(ca, "SELECT queue_compact('test.q')") == 1
    # The compacted file (a new file renamed over the old one) is locked too.
    _refused(cb, "SELECT COUNT(*) FROM test.q", a)
    _refused(cb, "INSERT INTO test.q VALUES (1001, 'from the second server')", a)
    assert a.value("SELECT COUNT(*) FROM test.q") == 140

    # Every row, in order, after a restart (a full reopen of the file).
    a.restart()
    assert _ids(a) == list(range(11, 151))
    assert a.value("SELECT msg FROM test.q WHERE id = 150") == "message 150"


def test_a_killed_holder_leaves_the_file_to_the_other_server(fresh_server, second):
    a, b = fresh_server, second
    a.sql("CREATE TABLE test.q (id INT, msg VARCHAR(100)) ENGINE=QUEUE")
    a.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i}, 'message {i}')" for i in range(1, 51)))
    ca = a.connect()
    _consume(ca, 5)
    cb = b.connect()
    _refused(cb, "SELECT COUNT(*) FROM test.q", a)

    a.kill9()  # the kernel drops a dead process's locks
    assert _ids(b) == list(range(6, 51))
    b.sql("INSERT INTO test.q VALUES (51, 'message 51')")
    cb = b.connect()
    _consume(cb, 1)

    # Now the second server holds it: the first, restarted, is refused in turn.
    a.start()
    _refused(a.connect(), "SELECT COUNT(*) FROM test.q", b)
    b.stop()
    assert _ids(a) == list(range(7, 52))
    assert query(a.connect(), "SELECT id, msg FROM test.q WHERE queue_wait('test.q', 0)") == [(7, "message 7")]
