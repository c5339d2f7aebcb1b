"""q4m-bench against a real server: every scenario, both engines, both ceilings and both sync
modes run and verify exactly-once delivery, and the report has its columns. Rates are printed
by the tool, never asserted (timings belong in benchmarks, not in pass/fail tests)."""
import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "build" / "bin" / "q4m-bench"
TO_MARKDOWN = REPO / "tools" / "bench" / "to_markdown.py"


@pytest.fixture(autouse=True)
def _bench_built():
    if not BENCH.exists():
        pytest.fail(f"{BENCH} is missing: run `make tools` first", pytrace=False)


def run_bench(server, tmp_path, *args):
    out = tmp_path / "bench.json"
    p = subprocess.run([str(BENCH), "--socket", str(server.socket), "--user", "root", "--db", "bench_smoke",
                        "--json-out", str(out), *args], capture_output=True, text=True, timeout=600)
    return p, (json.loads(out.read_text()) if out.exists() else None)


def markdown_of(doc, tmp_path):
    path = tmp_path / "render.json"
    path.write_text(json.dumps(doc))
    return subprocess.run(["python3", str(TO_MARKDOWN), str(path)], capture_output=True, text=True,
                          check=True).stdout


def test_every_scenario_runs_and_verifies(server, tmp_path):
    p, doc = run_bench(server, tmp_path, "--messages", "300", "--concurrency", "1,3", "--sync", "none,durable",
                       "--wait-timeout", "0.2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert doc["ok"] is True
    seen = {(r["scenario"], r["engine"], r["sync"], r["concurrency"]) for r in doc["runs"]}
    for sync in ("none", "durable"):
        for c in (1, 3):
            assert ("select1", "server", sync, c) in seen
            assert ("poll-empty", "server", sync, c) in seen
            for sc in ("multireader", "multirw", "multiwait", "enqueue"):
                for engine in ("queue", "innodb"):
                    assert (sc, engine, sync, c) in seen
    for r in doc["runs"]:
        assert r["ok"], r
        if r["engine"] != "server":
            assert r["messages"] == 300, r
            assert r["ratio_select1"] is not None, r
        if r["engine"] == "queue":
            assert r["ratio_poll"] is not None and r["ratio_innodb"] is not None, r
            # durable: every message needs a sync, shared by at most all connections
            if r["sync"] == "durable":
                assert r["syncs_per_message"] > 0, r
                if r["counters"]["sys_sync"]:
                    assert r["us_per_sync"] >= 0 and r["sync_busy"] >= 0, r  # from SHOW ENGINE QUEUE STATUS sync_us
                else:  # queue_binlog_redo with sync_binlog=1: only the binary log syncs on the commit path
                    assert r["us_per_sync"] is None and r["sync_busy"] == 0, r
            else:
                assert r["syncs_per_message"] == 0, r
                assert r["us_per_sync"] is None and r["sync_busy"] == 0, r  # no sync, no time in one
        elif r["engine"] == "innodb":
            assert r["us_per_sync"] is None and r["sync_busy"] is None, r  # InnoDB does not time its syncs
    assert "== ceilings" in p.stdout and "/poll" in p.stdout and "/innodb" in p.stdout and "us/sync" in p.stdout
    md = markdown_of(doc, tmp_path)
    for sync in ("none", "durable"):
        assert f"**ceilings, sync={sync}**" in md
        for sc in ("multireader", "multirw", "multiwait", "enqueue"):
            assert f"**{sc}, sync={sync}**" in md
    assert "all runs verified: yes" in md
    # the benchmark cleans up after itself
    assert server.value("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='bench_smoke'") == 0


def test_empty_poll_ceiling_needs_the_queue_engine(server, tmp_path):
    p, doc = run_bench(server, tmp_path, "--messages", "100", "--engines", "innodb", "--scenarios",
                       "multireader,select1,poll-empty")
    assert p.returncode == 0, p.stdout + p.stderr
    scenarios = {r["scenario"] for r in doc["runs"]}
    assert scenarios == {"select1", "multireader"}, scenarios


def test_markdown_of_a_run_without_ceilings_has_no_empty_ceiling_table(server, tmp_path):
    p, doc = run_bench(server, tmp_path, "--messages", "100", "--engines", "queue", "--scenarios", "multireader")
    assert p.returncode == 0, p.stdout + p.stderr
    md = markdown_of(doc, tmp_path)
    assert "ceilings" not in md, md
    rows = [line for line in md.splitlines() if line.startswith("| 4 |")]
    assert len(rows) == 1 and "| – | – |" in rows[0], md  # no InnoDB run, no ceiling to compare with


def test_prepared_protocol_runs_every_statement_prepared(server, tmp_path):
    """--protocol prepared: queues and ceilings use server-side prepared statements (the server
    counts their executions; a text run executes none), payloads longer than the client's first
    column buffer arrive whole, and every scenario still verifies."""
    def executions():
        return int(server.value("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                                "WHERE VARIABLE_NAME='COM_STMT_EXECUTE'"))
    before = executions()
    p, doc = run_bench(server, tmp_path, "--messages", "200", "--concurrency", "1,3", "--payload", "3000",
                       "--var-length", "--wait-timeout", "0.2", "--protocol", "prepared")
    assert p.returncode == 0, p.stdout + p.stderr
    assert doc["ok"] is True and doc["options"]["protocol"] == "prepared"
    assert {r["scenario"] for r in doc["runs"]} == {"select1", "poll-empty", "multireader", "multirw", "multiwait",
                                                  "enqueue"}
    # 50,000 SELECT 1 and as many polls per concurrency, plus every message's statements
    assert executions() - before > 4 * 50000
    assert "protocol: prepared" in p.stdout
    assert "prepared protocol" in markdown_of(doc, tmp_path)

    before = executions()
    p, doc = run_bench(server, tmp_path, "--messages", "100", "--scenarios", "multireader,select1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert doc["options"]["protocol"] == "text" and executions() == before


def test_held_read_view_stops_innodb_purge_during_the_run(server, tmp_path):
    """--hold-read-view keeps a consistent-snapshot transaction open through each queue run:
    none of the InnoDB queue's DELETEs can then be purged, so its history list grows by at
    least one entry per consumed message. QUEUE has no such garbage."""
    p, doc = run_bench(server, tmp_path, "--messages", "300", "--concurrency", "3", "--scenarios",
                       "multireader", "--hold-read-view")
    assert p.returncode == 0, p.stdout + p.stderr
    assert doc["ok"] is True and doc["options"]["hold_read_view"] is True
    innodb = [r for r in doc["runs"] if r["engine"] == "innodb"]
    # The counter is the run's delta: entries older than the read view (the bench's own setup)
    # may still be purged during the run and subtract a few (seen: +300 - 4 = 296).
    assert len(innodb) == 1 and innodb[0]["counters"]["Innodb_history_list_length"] >= 270, innodb
    assert "read view held" in p.stdout and "read view held" in markdown_of(doc, tmp_path)
    # the holder is gone once the run ends
    assert server.value("SELECT COUNT(*) FROM information_schema.INNODB_TRX") == 0


@pytest.mark.parametrize("protocol", ["text", "prepared"])
def test_enqueue_batches_with_a_short_last_batch_arrive_exactly_once(server, tmp_path, protocol):
    """enqueue: 3 clients insert 100 messages in INSERTs of 7 rows (shares of 34/33/33 end in
    a shorter batch); the scan afterwards finds each id once with its payload."""
    p, doc = run_bench(server, tmp_path, "--messages", "100", "--concurrency", "3", "--scenarios", "enqueue",
                       "--batch", "7", "--payload", "300", "--var-length", "--protocol", protocol)
    assert p.returncode == 0, p.stdout + p.stderr
    runs = doc["runs"]
    assert {r["engine"] for r in runs} == {"queue", "innodb"}
    for r in runs:
        assert r["ok"] and r["messages"] == 100, r
        assert r["put"]["count"] == 15, r  # ceil(34/7) + 2 * ceil(33/7) statements
    assert "QUEUE INSERT p50/p99" in markdown_of(doc, tmp_path)


@pytest.mark.parametrize("protocol", ["text", "prepared"])
def test_batch_consumers_receive_every_message_once(server, tmp_path, protocol):
    """--consume-batch 16: QUEUE consumers take queue_wait_batch() batches, InnoDB consumers claim
    LIMIT 16 ... SKIP LOCKED and delete them with one DELETE; both deliver every id once."""
    p, doc = run_bench(server, tmp_path, "--messages", "500", "--concurrency", "1,4", "--consume-batch", "16",
                       "--scenarios", "multireader,multiwait", "--sync", "durable", "--payload", "100",
                       "--wait-timeout", "0.2", "--protocol", protocol)
    assert p.returncode == 0, p.stdout + p.stderr
    assert doc["options"]["consume_batch"] == 16
    runs = doc["runs"]
    assert {(r["scenario"], r["engine"]) for r in runs} == {
        (sc, e) for sc in ("multireader", "multiwait") for e in ("queue", "innodb")}
    for r in runs:
        assert r["ok"] and r["messages"] == 500, r
    assert any("queue_wait_batch('q4m_bench_queue', 16," in sql for sql in doc["sql"]["queue"])
    assert any("LIMIT 16 FOR UPDATE SKIP LOCKED" in sql for sql in doc["sql"]["innodb"])
    assert "up to 16 messages per statement" in p.stdout


def test_queue_table_options_go_into_the_create_table(server, tmp_path):
    """--queue-options: the QUEUE table's own options, e.g. deduplication on the message id
    (which never repeats: every message still arrives, the option's cost is measured)."""
    p, doc = run_bench(server, tmp_path, "--messages", "300", "--concurrency", "3", "--engines", "queue",
                       "--scenarios", "multirw,enqueue", "--queue-options", "DEDUP_COLUMN='v' DEDUP_WINDOW=60",
                       "--wait-timeout", "0.2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert all(r["ok"] and r["messages"] == 300 for r in doc["runs"]), doc["runs"]
    assert any("ENGINE=QUEUE DEDUP_COLUMN='v' DEDUP_WINDOW=60" in sql for sql in doc["sql"]["queue"])
    p, _ = run_bench(server, tmp_path, "--messages", "30", "--engines", "queue", "--scenarios", "multirw",
                     "--queue-options", "DEDUP_COLUMN='nope'")
    assert p.returncode != 0 and "DEDUP_COLUMN: the table has no column `nope`" in p.stdout + p.stderr


def test_bad_option_is_a_clear_error(server, tmp_path):
    p, _ = run_bench(server, tmp_path, "--messages", "0")
    assert p.returncode != 0 and "--messages must be > 0" in p.stderr
    p, _ = run_bench(server, tmp_path, "--scenarios", "multireader,fastest")
    assert p.returncode != 0 and "unknown scenario 'fastest'" in p.stderr
    p, _ = run_bench(server, tmp_path, "--batch", "0")
    assert p.returncode != 0 and "--batch: 1..10000" in p.stderr
    p, _ = run_bench(server, tmp_path, "--consume-batch", "0")
    assert p.returncode != 0 and "--consume-batch: 1..10000" in p.stderr
    p, _ = run_bench(server, tmp_path, "--consume-batch", "8", "--scenarios", "multirw")
    assert p.returncode != 0 and "--consume-batch applies to multireader and multiwait" in p.stderr
    p, _ = run_bench(server, tmp_path, "--protocol", "binary")
    assert p.returncode != 0 and "--protocol: expected text or prepared, got 'binary'" in p.stderr
    p, _ = run_bench(server, tmp_path, "--consume-batch", "8", "--scenarios", "multireader,outbox")
    assert p.returncode != 0 and "leave outbox out of --scenarios" in p.stderr
    p, _ = run_bench(server, tmp_path, "--binlog", "maybe")
    assert p.returncode != 0 and "--binlog: expected on or off, got 'maybe'" in p.stderr


# With the binary log on a removal is a two-phase statement whose prepare is synced (docs/transactions.md).
@pytest.mark.parametrize("binlog", [False], ids=["binlog-off"], indirect=True)
def test_durable_inserts_consume_without_syncs_and_the_server_is_left_as_found(server, tmp_path):
    """--sync durable-inserts: INSERTs synced, removals not (queue_sync_removals=OFF in the
    benchmark's sessions only). The benchmark puts back the globals it changed."""
    original = server.value("SELECT @@global.innodb_flush_log_at_trx_commit")
    server.sql("SET GLOBAL innodb_flush_log_at_trx_commit = 0")
    try:
        p, doc = run_bench(server, tmp_path, "--messages", "300", "--concurrency", "3", "--scenarios",
                           "multireader,multirw", "--sync", "durable-inserts,none", "--wait-timeout", "0.2")
        assert p.returncode == 0, p.stdout + p.stderr
        runs = {(r["scenario"], r["engine"], r["sync"]): r for r in doc["runs"]}
        assert all(r["ok"] for r in doc["runs"]), doc["runs"]
        assert runs[("multireader", "queue", "durable-inserts")]["syncs_per_message"] == 0
        assert runs[("multirw", "queue", "durable-inserts")]["syncs_per_message"] > 0  # the inserts
        assert runs[("multireader", "innodb", "durable-inserts")]["ok"]
        assert "durable-inserts: queue_sync_mode=fdatasync with queue_sync_removals=OFF" in p.stdout
        assert "**multireader, sync=durable-inserts**" in markdown_of(doc, tmp_path)
        assert server.value("SELECT @@global.queue_sync_mode") == "fdatasync"
        assert server.value("SELECT @@global.queue_sync_removals") == 1
        assert server.value("SELECT @@global.innodb_flush_log_at_trx_commit") == 0
    finally:
        server.sql("SET GLOBAL innodb_flush_log_at_trx_commit = %s", (original,))


TXN_SCENARIOS = ("outbox", "consume-txn")
BINLOG_ARGS = ["--log-bin=mysql-bin", "--binlog-format=ROW", "--server-id=1"]


def _txn_runs_verified(doc, messages):
    runs = {(r["scenario"], r["engine"], r["sync"], r["concurrency"]): r for r in doc["runs"]}
    for r in doc["runs"]:
        assert r["ok"] and r["messages"] == messages, r
        assert r["scenario"] in TXN_SCENARIOS, r
        if r["engine"] == "queue":
            assert r["ratio_innodb"] is not None, r
            # the InnoDB rows commit with the queue's: their syncs are the run's too
            assert "Innodb_data_fsyncs" in r["counters"] and "sys_sync" in r["counters"], r
    return runs


@pytest.mark.parametrize("binlog", [False], ids=["binlog-off"], indirect=True)  # what it checks is the binary log off
@pytest.mark.parametrize("protocol", ["text", "prepared"])
def test_transactional_scenarios_run_and_verify(server, tmp_path, protocol):
    """outbox (an InnoDB order row and its message, one COMMIT) and consume-txn (take a message,
    its InnoDB result row, end it, one COMMIT) on both queues: every message in the queue once
    with its order row, every preloaded message consumed once with one result row. The shared
    server has the binary log off: two-phase commit through the server's tc.log."""
    p, doc = run_bench(server, tmp_path, "--scenarios", ",".join(TXN_SCENARIOS), "--messages", "200",
                       "--concurrency", "1,3", "--sync", "none,durable", "--payload", "100", "--var-length",
                       "--wait-timeout", "0.2", "--protocol", protocol)
    assert p.returncode == 0, p.stdout + p.stderr
    assert doc["ok"] is True and doc["server"]["binlog"] == "off"
    runs = _txn_runs_verified(doc, 200)
    assert set(runs) == {(sc, e, sync, c) for sc in TXN_SCENARIOS for e in ("queue", "innodb")
                         for sync in ("none", "durable") for c in (1, 3)}
    for sc in TXN_SCENARIOS:
        # durable, one connection: nothing to share a sync with; each transaction prepares QUEUE's part
        assert runs[(sc, "queue", "durable", 1)]["counters"]["sys_sync"] >= 200
        # none: no sync per transaction (the engine syncs its prepared-parts marker file, and its
        # directory, before the first prepare of a server run)
        assert runs[(sc, "queue", "none", 1)]["counters"]["sys_sync"] <= 2
        assert runs[(sc, "queue", "durable", 1)]["syncs_per_message"] > 1  # QUEUE's and InnoDB's
    assert runs[("outbox", "queue", "durable", 3)]["put"]["count"] == 200  # one per transaction
    assert runs[("consume-txn", "innodb", "none", 3)]["get"]["count"] == 200
    assert len(doc["sql"]["txn_tables"]) == 2
    assert any("consume-txn" in sql and "queue_end()" in sql for sql in doc["sql"]["queue"])
    assert any("consume-txn" in sql and "SKIP LOCKED" in sql for sql in doc["sql"]["innodb"])
    assert "binary log: off" in p.stdout and "== consume-txn" in p.stdout
    md = markdown_of(doc, tmp_path)
    for sc in TXN_SCENARIOS:
        assert f"**{sc}, sync=durable**" in md
    assert "QUEUE transaction p50/p99" in md and "binary log off" in md
    # the benchmark cleans up after itself, the InnoDB tables too
    assert server.value("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='bench_smoke'") == 0


def test_transactional_scenarios_with_the_binary_log(server_factory, tmp_path):
    """With the binary log on it coordinates the commit: durable also sets sync_binlog=1 (a
    transaction is committed once it is in the binary log), every transaction is in it, and the
    server's sync_binlog is put back afterwards. --binlog checks the server's setting."""
    s = server_factory.new(extra_args=BINLOG_ARGS, at_startup=True)
    try:
        sync_binlog = s.value("SELECT @@global.sync_binlog")  # 0 unless Q4M_EXTRA_SERVER_ARGS says otherwise
        p, doc = run_bench(s, tmp_path, "--scenarios", ",".join(TXN_SCENARIOS), "--messages", "100",
                           "--concurrency", "2", "--sync", "durable", "--wait-timeout", "0.2", "--binlog", "on")
        assert p.returncode == 0, p.stdout + p.stderr
        assert doc["ok"] is True and doc["server"]["binlog"] == "on"
        for r in _txn_runs_verified(doc, 100).values():
            assert r["counters"]["Binlog_commits"] >= 100, r
            assert r["counters"]["Binlog_group_commits"] > 0, r
        assert "sync_binlog=1" in p.stdout and "binary log: on" in p.stdout
        assert s.value("SELECT @@global.sync_binlog") == sync_binlog
        p, _ = run_bench(s, tmp_path, "--scenarios", "multirw", "--messages", "10", "--binlog", "off")
        assert p.returncode == 2 and "--binlog off, but" in p.stderr and "binary log on" in p.stderr
    finally:
        s.destroy()
@pytest.mark.parametrize("binlog", [False], ids=["binlog-off"], indirect=True)  # what it checks is the binary log off
def test_binlog_requirement_is_checked(server, tmp_path):
    p, _ = run_bench(server, tmp_path, "--scenarios", "outbox", "--messages", "10", "--binlog", "on")
    assert p.returncode == 2 and "binary log off" in p.stderr and "--log-bin" in p.stderr
    p, doc = run_bench(server, tmp_path, "--scenarios", "outbox", "--messages", "10", "--binlog", "off",
                       "--concurrency", "1")
    assert p.returncode == 0 and doc["ok"] is True, p.stdout + p.stderr
@pytest.mark.parametrize("binlog", [False], ids=["binlog-off"], indirect=True)  # what it checks is the binary log off
def test_queue_installed_at_runtime_fails_the_transactional_runs_clearly(fresh_server, tmp_path):
    """INSTALL SONAME while the binary log is off: MariaDB gives QUEUE no two-phase commit, so
    the QUEUE runs fail with the engine's error (the InnoDB ones still verify)."""
    p, doc = run_bench(fresh_server, tmp_path, "--scenarios", "outbox", "--messages", "20", "--concurrency", "1")
    assert p.returncode == 1, p.stdout + p.stderr
    runs = {r["engine"]: r for r in doc["runs"]}
    assert not runs["queue"]["ok"] and "cannot take part in transactions" in runs["queue"]["error"]
    assert runs["innodb"]["ok"]


def test_bench_script_loads_queue_at_startup_with_the_binary_log_for_transactions(tmp_path):
    """scripts/bench.sh starts its own server: QUEUE loaded at startup (two-phase commit), and
    the binary log on by default when a transactional scenario is asked for."""
    out = tmp_path / "script.json"
    p = subprocess.run(["bash", str(REPO / "scripts" / "bench.sh"), "--scenarios", "outbox,consume-txn",
                        "--concurrency", "2", "--sync", "durable", "--messages", "50", "--wait-timeout", "0.2",
                        "--json-out", str(out)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert doc["ok"] is True and doc["server"]["binlog"] == "on"
    assert {(r["scenario"], r["engine"]) for r in doc["runs"]} == {
        (sc, e) for sc in TXN_SCENARIOS for e in ("queue", "innodb")}


def test_receipts_consumers_receive_every_message_once(server, tmp_path):
    """--receipts LEASE: QUEUE consumers take rows with queue_receive() and end them with
    queue_end_receipt() (in consume-txn inside the transaction); every id arrives once, one row
    at a time and in batches."""
    for batch, scenarios, concurrency in (("1", "multireader,multiwait,consume-txn", "1,3"), ("8", "multireader", "3")):
        p, doc = run_bench(server, tmp_path, "--messages", "300", "--concurrency", concurrency, "--engines", "queue",
                           "--scenarios", scenarios, "--receipts", "30", "--consume-batch", batch,
                           "--wait-timeout", "0.2")
        assert p.returncode == 0, p.stdout + p.stderr
        assert doc["ok"] is True
        for r in doc["runs"]:
            assert r["ok"] and r["messages"] == 300, r
        assert any("queue_receive('q4m_bench_queue', 30, " + batch in sql for sql in doc["sql"]["queue"])
        assert any("queue_end_receipt" in sql for sql in doc["sql"]["queue"])
    p, _ = run_bench(server, tmp_path, "--receipts", "0")
    assert p.returncode == 2 and "--receipts: expected a lease in seconds > 0" in p.stderr


def test_fanout_delivers_every_message_once_to_every_group(server, tmp_path):
    """--scenarios fanout,fanout-tables --fanout 3: QUEUE's fanout is one table with 3
    subscriptions, InnoDB's and fanout-tables 3 tables filled by one transaction; each run
    delivers every message once to each group (3 x messages deliveries), leaves every table
    empty and drops what it made."""
    p, doc = run_bench(server, tmp_path, "--messages", "300", "--concurrency", "4", "--scenarios",
                       "fanout,fanout-tables", "--fanout", "3", "--sync", "durable", "--payload", "50",
                       "--wait-timeout", "0.2")
    assert p.returncode == 0, p.stdout + p.stderr
    runs = doc["runs"]
    assert {(r["scenario"], r["engine"]) for r in runs} == {
        ("fanout", "queue"), ("fanout", "innodb"), ("fanout-tables", "queue")}
    for r in runs:
        assert r["ok"] and r["messages"] == 900, r
    assert server.value("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'bench_smoke' "
                        "AND TABLE_NAME LIKE 'q4m_bench_fanout%'") == 0
    p, _ = run_bench(server, tmp_path, "--messages", "30", "--concurrency", "2", "--engines", "queue",
                     "--scenarios", "fanout", "--fanout", "3")
    assert p.returncode != 0 and "2 connections cannot serve 3 consumer groups" in p.stdout + p.stderr
    p, _ = run_bench(server, tmp_path, "--fanout", "1")
    assert p.returncode == 2 and "--fanout: 2..16 consumer groups" in p.stderr
    p, _ = run_bench(server, tmp_path, "--scenarios", "fanout", "--receipts", "5")
    assert p.returncode == 2 and "--receipts does not apply to fanout" in p.stderr
