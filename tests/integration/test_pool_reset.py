"""Connection pools clean a connection for its next user with COM_RESET_CONNECTION or
COM_CHANGE_USER, not by closing it. To q4m that is a disconnect: the owned row goes back to
the queue (it is not ended by the next user's queue_wait(), which would lose it), and delete
claims and a pending queue_set_srcid() are dropped. Driven by tests/integration/session_client.cc."""
import subprocess
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "build" / "tests" / "session_client"
RESETS = ["!reset", "!change_user"]


@pytest.fixture(autouse=True)
def _client_built():
    if not CLIENT.exists():
        pytest.fail(f"{CLIENT} is missing: run `make test-clients` first", pytrace=False)


class Session:
    """One pooled connection: each call sends a line and returns the client's answer."""

    def __init__(self, server):
        self.p = subprocess.Popen([str(CLIENT), str(server.socket), "test"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def __call__(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline()
        assert answer, f"session_client died after {line!r}"
        return answer.rstrip("\n")

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


@pytest.fixture
def session(server):
    s = Session(server)
    yield s
    s.close()


def _queue(server, n):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES " + ", ".join(f"({i})" for i in range(1, n + 1)))


def _rows(server):
    """Live rows, owned ones included (other connections do not see owned rows)."""
    return server.value("SELECT `ROWS` FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")


def _owned(server):
    return server.sql("SELECT ROW_ID FROM information_schema.QUEUE_OWNED_ROWS WHERE TABLE_NAME='q'")


@pytest.mark.parametrize("reset", RESETS)
def test_the_next_user_of_a_reset_connection_does_not_end_the_previous_users_row(server, session, reset):
    _queue(server, 3)
    assert session("SELECT v FROM q WHERE queue_wait('q', 0)") == "1"
    assert session(reset) == "ok"
    # The next user of the pooled connection takes a row: the first user's row must come
    # back, not be removed as the previous row of this connection.
    assert session("SELECT v FROM q WHERE queue_wait('q', 0)") == "1"
    assert _rows(server) == 3
    assert session("SELECT queue_delivery_count()") == "2"
    assert session("SELECT queue_end()") == "1"
    assert _rows(server) == 2


@pytest.mark.parametrize("reset", RESETS)
def test_a_reset_connection_leaves_owner_mode(server, session, reset):
    _queue(server, 2)
    assert session("SELECT queue_wait('test.q', 0)") == "1"
    rowid = session("SELECT queue_rowid()")
    assert _owned(server) == [(int(rowid),)]
    assert session(reset) == "ok"
    assert session("SELECT queue_rowid()") == "NULL"
    assert _owned(server) == []
    assert session("SELECT COUNT(*) FROM q") == "2"  # other rows are visible again: not in owner mode
    assert session("SELECT queue_end()").startswith("error ")  # nothing owned


def test_a_reset_drops_a_pending_queue_set_srcid(server, session):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    assert session("SELECT queue_set_srcid(1, 'a', 5)") == "1"
    assert session("!reset") == "ok"
    assert session("INSERT INTO q VALUES (1)") == "ok"  # a plain insert now, not source row 5
    assert session("SELECT queue_set_srcid(1, 'a', 5)") == "1"
    assert session("INSERT INTO q VALUES (2)") == "ok"  # so row 5 of source 1 is new: kept
    assert _rows(server) == 2


def test_without_a_reset_the_session_keeps_its_row(server, session):
    _queue(server, 2)
    assert session("SELECT queue_wait('test.q', 0)") == "1"
    assert session("SELECT 1") == "1"
    assert session("SELECT v FROM q") == "1"  # owner mode: only the owned row
    assert session("SELECT v FROM q WHERE queue_wait('q', 0)") == "2"  # ends row 1
    assert _rows(server) == 1
