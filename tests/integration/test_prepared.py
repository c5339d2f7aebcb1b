"""Consuming through server-side prepared statements (the binary protocol), the way JDBC with
useServerPrepStmts, Go's database/sql and PDO without emulation do it: one
`SELECT v FROM q WHERE queue_wait(?, ?)` prepared once and executed per message, with the
table name and timeout bound as parameters. Driven by tests/integration/ps_consumer.cc."""
import subprocess
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "build" / "tests" / "ps_consumer"


@pytest.fixture(autouse=True)
def _client_built():
    if not CLIENT.exists():
        pytest.fail(f"{CLIENT} is missing: run `make test-clients` first", pytrace=False)


def consumer(server, table, count, timeout, mode="end"):
    return [str(CLIENT), str(server.socket), "test", table, str(count), str(timeout), mode]


def run_consumer(server, table, count, timeout=0.2, mode="end"):
    p = subprocess.run(consumer(server, table, count, timeout, mode), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout.split()


def make_queue(server, n, table="q"):
    server.sql(f"CREATE TABLE {table} (v BIGINT NOT NULL) ENGINE=QUEUE")
    if n:
        server.sql(f"INSERT INTO {table} VALUES " + ",".join(f"({i})" for i in range(1, n + 1)))


def test_each_execution_consumes_the_previous_row_and_takes_the_next(server):
    make_queue(server, 50)
    rc, out = run_consumer(server, "q", 51)
    assert rc == 0, out
    assert out == [str(i) for i in range(1, 51)] + ["none"]
    assert server.value("SELECT COUNT(*) FROM q") == 0


def test_prepared_queue_end_removes_the_last_row_only(server):
    make_queue(server, 3)
    rc, out = run_consumer(server, "q", 2)
    assert rc == 0 and out == ["1", "2"]
    assert [r[0] for r in server.sql("SELECT v FROM q")] == [3]


def test_disconnect_while_owning_returns_the_row(server):
    make_queue(server, 2)
    p = subprocess.Popen(consumer(server, "q", 1, 1, "keep"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "1"
        assert p.stdout.readline().strip() == "holding"
        # Owned by the prepared-statement connection: invisible to others.
        assert [r[0] for r in server.sql("SELECT v FROM q")] == [2]
    finally:
        p.stdin.close()  # the client closes its connection without queue_end()
        p.wait(timeout=60)
    assert sorted(r[0] for r in server.sql("SELECT v FROM q")) == [1, 2]


def test_parallel_prepared_consumers_get_every_row_once(server):
    make_queue(server, 400)
    procs = [subprocess.Popen(consumer(server, "q", 110, 0.05), stdout=subprocess.PIPE, text=True) for _ in range(4)]
    got = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
        got += [int(x) for x in out.split() if x != "none"]
    assert sorted(got) == list(range(1, 401))
    assert server.value("SELECT COUNT(*) FROM q") == 0


def test_bad_parameter_is_a_clear_error(server):
    make_queue(server, 1)
    server.sql("CREATE TABLE plain (v BIGINT NOT NULL) ENGINE=InnoDB")
    # the statement reads `plain`, and the bound table argument names it too
    rc, out = run_consumer(server, "plain", 1)
    assert rc == 1
    line = " ".join(out)
    assert line.startswith("error 1210") and "table 'test.plain' is not a QUEUE table" in line
