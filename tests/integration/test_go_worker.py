"""The Go worker library (clients/go) against real servers: its own Go tests (producing, workers
on goroutines with an InnoDB ledger, retries, dead letters, the heartbeat, a lost lease, a stop
deadline) run on the shared server; then a worker process (cmd/q4m-go-worker-proc) through
SIGTERM, kill -9 of the server mid-job and kill -9 of the worker mid-job, exactly once."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from q4m_server import REPO

GO_DIR = REPO / "clients" / "go"
GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
pytestmark = pytest.mark.skipif(GO is None, reason="no Go toolchain (go) on this machine")


def _go_env():
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod", CGO_ENABLED="0")
    return env


@pytest.fixture(scope="module")
def go_bins(tmp_root):
    out = tmp_root / "go-bin"
    out.mkdir(exist_ok=True)
    for args in (["test", "-c", "-o", str(out / "q4m.test"), "."],
                 ["build", "-o", str(out / "proc"), "./cmd/q4m-go-worker-proc"]):
        r = subprocess.run([GO, *args], cwd=GO_DIR, env=_go_env(), capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, f"go {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return out


def wait_for(cond, timeout=60, what="condition", state=None):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f": {state()}" if state else ""))
        time.sleep(0.05)


def test_the_go_librarys_tests_pass_against_a_server(server, go_bins):
    r = subprocess.run([str(go_bins / "q4m.test"), "-test.v", "-test.timeout", "300s"],
                       env=dict(os.environ, Q4M_TEST_SOCKET=str(server.socket)),
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "--- SKIP" not in r.stdout, r.stdout  # the server's tests ran, none skipped
    assert r.stdout.count("--- PASS") >= 13, r.stdout


def make_jobs(s, n):
    s.sql("CREATE TABLE jobs (id INT NOT NULL, body VARCHAR(100)) ENGINE=QUEUE")
    s.sql("CREATE TABLE ledger (job_id INT NOT NULL, delivery INT, who VARCHAR(20)) ENGINE=InnoDB")
    s.sql("INSERT INTO jobs VALUES " + ", ".join(f"({i}, 'job {i}')" for i in range(n)))


def ledger_counts(s):
    return dict(s.sql("SELECT job_id, COUNT(*) FROM ledger GROUP BY job_id"))


def queue_rows(s):
    return s.value("SELECT `ROWS` FROM information_schema.QUEUE_TABLES WHERE TABLE_SCHEMA='test' "
                   "AND TABLE_NAME='jobs'")


def _proc(go_bins, s, tmp, *extra):
    return subprocess.Popen([str(go_bins / "proc"), "-socket", str(s.socket), "-marker", str(tmp / "marker"),
                             "-block-file", str(tmp / "block"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(p):
    out, err = p.communicate(timeout=90)
    assert p.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_sigterm_stops_a_worker_process_after_its_job(server, go_bins, tmp_path):
    make_jobs(server, 2)
    (tmp_path / "block").write_text("")
    p = _proc(go_bins, server, tmp_path, "-block-id", "0", "-transactional")
    try:
        wait_for(lambda: (tmp_path / "marker").exists() or p.poll() is not None, what="the job to start")
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert p.poll() is None  # still finishing its job
        (tmp_path / "block").unlink()
        result = _result(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert result["in_time"] is True and result["metrics"]["succeeded"] == 1
    assert ledger_counts(server) == {0: 1}
    assert queue_rows(server) == 1  # the second job was not taken after SIGTERM


@pytest.mark.parametrize("binlog", [True, False], ids=["binlog", "no-binlog"])
def test_server_killed_mid_job_every_job_exactly_once(server_factory, go_bins, tmp_path, binlog):
    s = server_factory.new(at_startup=True, binlog=binlog)
    p = None
    try:
        n = 40
        make_jobs(s, n)
        (tmp_path / "block").write_text("")
        p = _proc(go_bins, s, tmp_path, "-block-id", "10", "-transactional", "-goroutines", "3")
        wait_for(lambda: (tmp_path / "marker").exists() or p.poll() is not None, what="job 10 to start")
        assert p.poll() is None, p.communicate()
        s.kill9()  # job 10 mid-way: its ledger row written in its transaction, not committed
        (tmp_path / "block").unlink()
        s.start()
        wait_for(lambda: s.value("SELECT COUNT(DISTINCT job_id) FROM ledger") == n and queue_rows(s) == 0,
                 what="every job after the restart",
                 state=lambda: f"ledger {ledger_counts(s)}, queue rows {queue_rows(s)}")
        p.send_signal(signal.SIGTERM)
        result = _result(p)
        counts = ledger_counts(s)
        assert counts == {i: 1 for i in range(n)}, {k: v for k, v in counts.items() if v != 1}
        assert result["metrics"]["reconnects"] >= 1, result
    finally:
        if p is not None and p.poll() is None:
            p.kill()
        s.destroy()


def test_worker_process_killed_mid_job_another_finishes_every_job(server, go_bins, tmp_path):
    n = 20
    make_jobs(server, n)
    (tmp_path / "block").write_text("")
    first = _proc(go_bins, server, tmp_path, "-block-id", "5", "-goroutines", "2", "-transactional")
    try:
        wait_for(lambda: (tmp_path / "marker").exists() or first.poll() is not None, what="job 5 to start")
        assert first.poll() is None, first.communicate()
    finally:
        first.kill()  # SIGKILL mid-job: job 5's ledger row is written, not committed
        first.wait()
    second = _proc(go_bins, server, tmp_path, "-goroutines", "2", "-transactional")
    try:
        wait_for(lambda: server.value("SELECT COUNT(DISTINCT job_id) FROM ledger") == n and queue_rows(server) == 0,
                 what="every job", state=lambda: f"ledger {ledger_counts(server)}")
        second.send_signal(signal.SIGTERM)
        _result(second)
    finally:
        if second.poll() is None:
            second.kill()
    assert ledger_counts(server) == {i: 1 for i in range(n)}
    [(delivery, who)] = server.sql("SELECT delivery, who FROM ledger WHERE job_id = 5")
    assert delivery >= 2 and who == str(second.pid), (delivery, who)
