"""q4m-monitor's /metrics: Prometheus text and OpenMetrics written by prometheus_client, values
as the engine counts them, per table or (opted out) summed."""
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor_harness import Monitor
from sqlcheck import value


@pytest.fixture
def monitors(server, tmp_path):
    started = []

    def start(*args):
        m = Monitor(server, tmp_path, *args)
        started.append(m)
        return m
    yield start
    for m in started:
        m.stop()


def _samples(text):
    """{(name, frozenset(labels)): value} of every sample."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def _wait_for(monitor, name, labels, expected, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        got = _samples(monitor.get("/metrics")[0]).get((name, frozenset(labels.items())))
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_depth_by_state_counters_and_wait_histogram_per_table(server, monitors):
    server.sql("CREATE TABLE test.jobs (v INT) ENGINE=QUEUE MAX_DELIVERIES=1")
    server.sql("INSERT INTO test.jobs VALUES (1), (2), (3), (4)")
    c, owner = server.connect(), server.connect()
    assert value(c, "SELECT queue_wait('jobs', 0)") == 1
    assert value(c, "SELECT queue_abort()") == 1         # row 1: dead
    assert value(c, "SELECT queue_wait('jobs', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1           # row 2: consumed
    assert value(owner, "SELECT queue_wait('jobs', 0)") == 1  # row 3: owned
    m = monitors()
    t = {"schema": "test", "table": "jobs"}
    assert _wait_for(m, "q4m_queue_rows", {**t, "state": "dead"}, 1.0) == 1.0
    s = _samples(m.get("/metrics")[0])
    row = lambda state: s[("q4m_queue_rows", frozenset({**t, "state": state}.items()))]  # noqa: E731
    assert (row("ready"), row("owned"), row("delayed"), row("dead")) == (1.0, 1.0, 0.0, 1.0)
    assert s[("q4m_up", frozenset())] == 1.0
    for name, expected in [("q4m_queue_enqueued_rows_total", 4), ("q4m_queue_consumed_rows_total", 1),
                           ("q4m_queue_aborted_rows_total", 1), ("q4m_queue_dead_lettered_rows_total", 1),
                           ("q4m_queue_handout_wait_seconds_count", 3)]:
        assert s[(name, frozenset(t.items()))] == expected, name
    assert s[("q4m_queue_handout_wait_seconds_bucket", frozenset({**t, "le": "+Inf"}.items()))] == 3
    assert s[("q4m_queue_oldest_ready_age_seconds", frozenset(t.items()))] > 0
    assert ("q4m_sync_seconds_total", frozenset()) in s and ("q4m_syncs_total", frozenset()) in s


def test_openmetrics_is_negotiated(server, monitors):
    m = monitors()
    body, ctype = m.get("/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert ctype.startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")
    body, ctype = m.get("/metrics")
    assert ctype.startswith("text/plain")


def test_per_table_labels_can_be_turned_off(server, monitors):
    for t in ("a", "b"):
        server.sql(f"CREATE TABLE test.{t} (v INT) ENGINE=QUEUE")
        server.sql(f"INSERT INTO test.{t} VALUES (1), (2)")
    m = monitors("--no-per-table-metrics")
    assert _wait_for(m, "q4m_queue_rows", {"state": "ready"}, 4.0) == 4.0
    s = _samples(m.get("/metrics")[0])
    assert not [k for k in s if any(label == "table" for label, _ in k[1])]


def test_a_server_that_is_down_reports_up_0(fresh_server, tmp_path):
    m = Monitor(fresh_server, tmp_path)
    try:
        fresh_server.stop()
        assert _wait_for(m, "q4m_up", {}, 0.0) == 0.0
        fresh_server.start()
        assert _wait_for(m, "q4m_up", {}, 1.0) == 1.0
    finally:
        m.stop()


def test_a_table_named_with_a_colon_is_reported_with_the_others(server, monitors):
    # The sampler names tables to queue_stats() quoted (`test`.`odd:name`): unquoted, ':name'
    # read as a condition and the table was skipped (test_monitor_security.py: every odd name).
    server.sql("CREATE TABLE test.`odd:name` (v INT) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.fine (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.fine VALUES (1), (2), (3)")
    server.sql("INSERT INTO test.`odd:name` VALUES (1)")
    m = monitors()
    assert _wait_for(m, "q4m_queue_rows", {"schema": "test", "table": "fine", "state": "ready"}, 3.0) == 3.0
    assert _wait_for(m, "q4m_queue_rows", {"schema": "test", "table": "odd:name", "state": "ready"}, 1.0) == 1.0
    assert "skipped" not in m.log.read_text()


def test_limits_figures_per_table(server, monitors):
    """GROUP_CONCURRENCY / MAX_IN_FLIGHT: rows out, rows held back and keys at their limit
    (docs/limits.md), as gauges an alert can watch."""
    server.sql("CREATE TABLE test.lim (v INT, cust INT) ENGINE=QUEUE "
               "MESSAGE_GROUP_COLUMN='cust' GROUP_CONCURRENCY=1 MAX_IN_FLIGHT=5")
    server.sql("INSERT INTO test.lim VALUES (1, 7), (2, 7), (3, 7), (4, 8)")
    owner = server.connect()
    assert value(owner, "SELECT queue_wait('lim', 0)") == 1  # row 1: customer 7 at its limit
    m = monitors()
    t = {"schema": "test", "table": "lim"}
    assert _wait_for(m, "q4m_queue_in_flight_rows", t, 1.0) == 1.0
    s = _samples(m.get("/metrics")[0])
    assert s[("q4m_queue_held_back_rows", frozenset(t.items()))] == 2.0
    assert s[("q4m_queue_groups_at_limit", frozenset(t.items()))] == 1.0


def test_memory_the_engine_holds_per_table_and_in_total(server, monitors):
    server.sql("CREATE TABLE test.mem (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.mem SELECT seq FROM seq_1_to_1000")
    m = monitors()
    t = {"schema": "test", "table": "mem"}
    assert _wait_for(m, "q4m_queue_rows", {**t, "state": "ready"}, 1000.0) == 1000.0
    s = _samples(m.get("/metrics")[0])
    table = s[("q4m_queue_memory_bytes", frozenset(t.items()))]
    assert table > 0
    assert s[("q4m_engine_memory_bytes", frozenset())] >= table  # a gauge, not a _total counter
    assert ("q4m_engine_memory_bytes_total", frozenset()) not in s


def test_subscription_lag_per_subscription(server, monitors):
    server.sql("CREATE TABLE test.events (v INT) ENGINE=QUEUE")
    server.sql("SELECT queue_subscribe('test.events', 'fast')")
    server.sql("SELECT queue_subscribe('test.events', 'slow')")
    server.sql("INSERT INTO test.events VALUES (1), (2), (3)")
    c = server.connect()
    for _ in range(3):
        assert value(c, "SELECT queue_wait('test.events@fast', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    m = monitors()
    slow = {"schema": "test", "table": "events", "subscription": "slow"}
    assert _wait_for(m, "q4m_subscription_pending_rows", slow, 3.0) == 3.0
    s = _samples(m.get("/metrics")[0])
    assert s[("q4m_subscription_pending_rows", frozenset({**slow, "subscription": "fast"}.items()))] == 0.0
    assert s[("q4m_subscription_oldest_age_seconds", frozenset(slow.items()))] > 0


def test_the_dashboard_lists_a_tables_subscriptions_with_their_lag(server, monitors):
    from monitor_harness import Client
    server.sql("CREATE TABLE test.feed (v INT) ENGINE=QUEUE")
    server.sql("SELECT queue_subscribe('test.feed', 'audit', 'v > 1')")
    server.sql("INSERT INTO test.feed VALUES (1), (2)")
    c = Client(monitors())
    assert c.login("root", "").status == 303
    page = c.request("/queue?schema=test&table=feed")
    assert page.status == 200
    assert 'id="subscriptions"' in page.body and "<td>audit</td>" in page.body
    assert "<td>v &gt; 1</td>" in page.body  # escaped
