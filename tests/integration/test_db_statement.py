"""q4m-bench's statement class (tools/common/db_statement.h) over both protocols: a statement
that fails after its result started leaves the statement and its connection usable. Over the
binary protocol Connector/C's statement used to wait for rows that never came: the next run
broke the connection ("Server has gone away"), which a CI run hit on an InnoDB deadlock in the
bench's SKIP LOCKED claim. Driven by tests/integration/db_statement_client.cc."""
import subprocess
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "build" / "tests" / "db_statement_client"


@pytest.fixture(autouse=True)
def _client_built():
    if not CLIENT.exists():
        pytest.fail(f"{CLIENT} is missing: run `make test-clients` first", pytrace=False)


@pytest.mark.parametrize("protocol", ["text", "prepared"])
def test_an_error_in_the_middle_of_a_result_leaves_statement_and_connection_usable(server, protocol):
    server.sql("CREATE TABLE items (id INT PRIMARY KEY, g INT NOT NULL) ENGINE=InnoDB")
    server.sql("CREATE TABLE pairs (g INT NOT NULL, v INT NOT NULL) ENGINE=InnoDB")
    server.sql("INSERT INTO items VALUES (1, 10), (2, 10), (3, 20)")
    # group 20 has two values: the subquery fails for item 3, after items 1 and 2
    server.sql("INSERT INTO pairs VALUES (10, 100), (20, 200), (20, 201)")
    p = subprocess.run([str(CLIENT), str(server.socket), "test", protocol, "2", "3", "2", "3", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    ok_two = ["row 1 100", "row 2 100", "select1 ok"]
    failed = ["error 1242", "select1 ok"]  # ER_SUBQUERY_NO_1_ROW
    assert p.stdout.splitlines() == ok_two + failed + ok_two + failed + ["row 1 100", "select1 ok"]
