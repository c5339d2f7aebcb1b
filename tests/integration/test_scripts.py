"""The scripts a new user runs first: `./q4m.sh run` (scripts/local-server.sh) and
`./q4m.sh bench` (scripts/bench.sh), run for real on temporary directories."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pymysql
import pytest

from q4m_server import REPO

LOCAL_SERVER = REPO / "scripts" / "local-server.sh"
BENCH_SCRIPT = REPO / "scripts" / "bench.sh"


@pytest.fixture
def local_var():
    """A var directory for scripts/local-server.sh (Q4M_VAR), its server stopped afterwards.
    Short path: the server's unix socket lives in it."""
    var = Path(tempfile.mkdtemp(prefix="q4m-ls-"))
    env = dict(os.environ, Q4M_VAR=str(var), Q4M_MONITOR="0")
    yield var, env
    subprocess.run(["bash", str(LOCAL_SERVER), "stop"], env=env, capture_output=True, timeout=120)
    shutil.rmtree(var, ignore_errors=True)


def test_the_local_server_runs_utf8mb4_with_the_binary_log_and_says_how_to_stop(local_var):
    var, env = local_var
    p = subprocess.run(["bash", str(LOCAL_SERVER), "start"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    # What it prints is what the README says (issue 40: it printed `make stop`).
    assert "stop:     ./q4m.sh stop" in p.stdout, p.stdout
    assert "`./q4m.sh stop`" in (REPO / "README.md").read_text()
    c = pymysql.connect(unix_socket=str(var / "mysqld.sock"), user="root", database="test", autocommit=True,
                        charset="utf8mb4")
    try:
        with c.cursor() as cur:
            cur.execute("SELECT @@character_set_server, @@collation_server, @@log_bin")
            assert cur.fetchone() == ("utf8mb4", "utf8mb4_general_ci", 1)
            # One log (issue 42): the binary log syncs every commit and QUEUE's redo rides it.
            cur.execute("SELECT @@sync_binlog, @@queue_binlog_redo")
            assert cur.fetchone() == (1, 1)
            # README's first steps with text a latin1 server refused (error 1366).
            cur.execute("CREATE TABLE q (id INT, msg TEXT) ENGINE=QUEUE")
            cur.execute("INSERT INTO q VALUES (1, 'h\u00e9llo \u2713')")
            cur.execute("SELECT msg FROM q")
            assert cur.fetchall() == (("h\u00e9llo \u2713",),)
    finally:
        c.close()
    p = subprocess.run(["bash", str(LOCAL_SERVER), "stop"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "stopped" in p.stdout, p.stdout + p.stderr


def test_the_local_server_moves_a_latin1_test_database_of_an_earlier_var_to_utf8mb4(local_var):
    var, env = local_var
    p = subprocess.run(["bash", str(LOCAL_SERVER), "start"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    c = pymysql.connect(unix_socket=str(var / "mysqld.sock"), user="root", autocommit=True)
    with c.cursor() as cur:
        cur.execute("ALTER DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci")  # as the old server made it
    c.close()
    for step in ("stop", "start"):
        p = subprocess.run(["bash", str(LOCAL_SERVER), step], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    assert "latin1 -> utf8mb4" in p.stdout, p.stdout
    c = pymysql.connect(unix_socket=str(var / "mysqld.sock"), user="root", autocommit=True)
    try:
        with c.cursor() as cur:
            cur.execute("SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME='test'")
            assert cur.fetchone() == ("utf8mb4",)
    finally:
        c.close()


BENCH_ARGS = ["--engines", "queue", "--scenarios", "enqueue", "--concurrency", "1", "--sync", "none",
              "--messages", "200"]


def _bench(*extra):
    if not (REPO / "build" / "bin" / "q4m-bench").exists():
        pytest.fail("build/bin/q4m-bench is missing: run `make tools` first", pytrace=False)
    return subprocess.run(["bash", str(BENCH_SCRIPT), *BENCH_ARGS, *extra], capture_output=True, text=True,
                          timeout=900)


def test_bench_runs_the_recommended_configuration_by_default_and_says_so():
    p = _bench()
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "configuration: binary log on" in p.stdout, p.stdout
    assert "binary log off" not in p.stdout, p.stdout


def test_bench_runs_both_configurations_on_request():
    p = _bench("--binlog", "both")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    on = p.stdout.index("configuration: binary log on")
    off = p.stdout.index("configuration: binary log off")
    assert on < off, p.stdout
