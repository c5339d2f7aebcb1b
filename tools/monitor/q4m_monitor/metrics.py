"""/metrics: the latest sample as Prometheus/OpenMetrics families (prometheus_client writes the
exposition format). Per table by default, labels `schema` and `table`; with per_table off,
summed over all tables without them (for hundreds of tables)."""
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import CollectorRegistry

from .sampling import Sampler, ready_rows

# queue_stats() counter -> (metric name without _total, help)
TABLE_COUNTERS = [
    ("rows_inserted", "q4m_queue_enqueued_rows", "Rows inserted into the queue (since the table was opened)."),
    ("rows_consumed", "q4m_queue_consumed_rows", "Rows removed by their consumer (queue_end(), the next queue_wait())."),
    ("rows_aborted", "q4m_queue_aborted_rows", "Rows given back by their consumer (queue_abort(), a disconnect)."),
    ("rows_expired", "q4m_queue_expired_rows", "Rows removed by MESSAGE_TTL."),
    ("rows_dead_lettered", "q4m_queue_dead_lettered_rows", "Rows that became dead letters (MAX_DELIVERIES)."),
    ("lease_expiries", "q4m_queue_lease_expiries", "Rows whose lease ran out before they were ended."),
    ("rows_deduplicated", "q4m_queue_deduplicated_rows", "Rows dropped as duplicates (DEDUP_COLUMN)."),
    ("rows_refused", "q4m_queue_refused_rows", "Rows of INSERTs refused by MAX_ROWS."),
    ("rows_released", "q4m_queue_released_rows", "Owned rows given back by an operator (queue_release_owned())."),
    ("rows_redriven", "q4m_queue_redriven_rows", "Dead rows queued again (queue_redrive_dead())."),
    ("rows_purged", "q4m_queue_purged_rows", "Dead rows removed (queue_purge_dead())."),
    ("damaged_reads", "q4m_queue_damaged_reads", "Reads of a row whose bytes on disk failed their checksum."),
]
STATES = ("ready", "owned", "delayed", "dead")


def _state_counts(s: dict) -> dict:
    return {"ready": ready_rows(s), "owned": s["owned_rows"], "delayed": s["delayed_rows"], "dead": s["dead_rows"]}


class QueueCollector:
    def __init__(self, sampler: Sampler, per_table: bool):
        self.sampler, self.per_table = sampler, per_table

    def collect(self):
        s = self.sampler.latest()
        up = GaugeMetricFamily("q4m_up", "1 if the monitor's last poll of the server succeeded.")
        up.add_metric([], 1.0 if s and s.ok else 0.0)
        yield up
        if not s or not s.ok:
            return
        when = GaugeMetricFamily("q4m_last_poll_timestamp_seconds", "When the values below were read.")
        when.add_metric([], s.at)
        yield when
        yield from self._tables(s.tables)
        yield from self._subscriptions(s.tables)
        yield from self._engine(s.engine)

    def _groups(self, tables: dict):
        """(label values, [queue_stats dicts]) per series: one per table, or one for all."""
        if self.per_table:
            return [([schema, table], [st]) for (schema, table), st in sorted(tables.items())]
        return [([], list(tables.values()))]

    def _tables(self, tables: dict):
        labels = ["schema", "table"] if self.per_table else []
        rows = GaugeMetricFamily("q4m_queue_rows", "Rows in the queue by state: ready (may be handed out), "
                                 "owned (by a consumer), delayed (not before a time), dead (MAX_DELIVERIES).",
                                 labels=labels + ["state"])
        gauges = {
            "oldest_ready": GaugeMetricFamily("q4m_queue_oldest_ready_age_seconds",
                                              "Age of the oldest row that may be handed out now (0: none).", labels=labels),
            "oldest": GaugeMetricFamily("q4m_queue_oldest_age_seconds", "Age of the oldest row in any state.",
                                        labels=labels),
            "waiters": GaugeMetricFamily("q4m_queue_waiters", "Consumers blocked in queue_wait() on the table.",
                                         labels=labels),
            "max_rows": GaugeMetricFamily("q4m_queue_max_rows", "MAX_ROWS (0: no limit).", labels=labels),
            "file_bytes": GaugeMetricFamily("q4m_queue_file_bytes", "Size of the data file.", labels=labels),
            "memory_bytes": GaugeMetricFamily("q4m_queue_memory_bytes", "RAM the table's row index holds "
                                              "(docs/limits.md: per plain row and per row with state).",
                                              labels=labels),
            # The limits (docs/limits.md): what is out, what waits for a limit, which keys are at one.
            "in_flight": GaugeMetricFamily("q4m_queue_in_flight_rows",
                                           "Rows out (owned), as MAX_IN_FLIGHT counts them.", labels=labels),
            "rows_held_back": GaugeMetricFamily("q4m_queue_held_back_rows",
                                                "Ready rows a take may not have now: behind their group's "
                                                "GROUP_CONCURRENCY/GROUP_RATE, or the table at MAX_IN_FLIGHT/MAX_RATE.",
                                                labels=labels),
            "groups_at_limit": GaugeMetricFamily("q4m_queue_groups_at_limit",
                                                 "Message groups with queued rows none of which may go now.",
                                                 labels=labels),
            # HISTORY_RETENTION: ended rows kept, apart from the queue's rows.
            "history_rows": GaugeMetricFamily("q4m_queue_history_rows",
                                              "Ended rows kept by HISTORY_RETENTION (not in q4m_queue_rows).",
                                              labels=labels),
        }
        counters = [(key, CounterMetricFamily(name, help_, labels=labels)) for key, name, help_ in TABLE_COUNTERS]
        wait = HistogramMetricFamily("q4m_queue_handout_wait_seconds",
                                     "Time from a row's INSERT to its first hand-out.", labels=labels)
        for values, group in self._groups(tables):
            states = {k: sum(_state_counts(st)[k] for st in group) for k in STATES}
            for state in STATES:
                rows.add_metric(values + [state], states[state])
            gauges["oldest_ready"].add_metric(values, max([st["oldest_ready_age_ms"] for st in group] or [0]) / 1000)
            gauges["oldest"].add_metric(values, max([st["oldest_age_ms"] for st in group] or [0]) / 1000)
            gauges["waiters"].add_metric(values, sum(st["waiters"] for st in group))
            gauges["max_rows"].add_metric(values, sum(st["max_rows"] for st in group))
            gauges["file_bytes"].add_metric(values, sum(st["file_bytes"] for st in group))
            gauges["memory_bytes"].add_metric(values, sum(st.get("memory_bytes", 0) for st in group))
            for key in ("in_flight", "rows_held_back", "groups_at_limit", "history_rows"):
                gauges[key].add_metric(values, sum(st.get(key, 0) for st in group))
            for key, family in counters:
                family.add_metric(values, sum(st.get(key, 0) for st in group))
            if group:
                bounds = group[0]["handout_wait"]["bounds_ms"]
                cumulative = [sum(st["handout_wait"]["cumulative"][i] for st in group) for i in range(len(bounds) + 1)]
                buckets = [(_le(b / 1000), c) for b, c in zip(bounds, cumulative)] + [("+Inf", cumulative[-1])]
                wait.add_metric(values, buckets, sum(st["handout_wait"]["sum_ms"] for st in group) / 1000)
        yield rows
        yield from gauges.values()
        for _, family in counters:
            yield family
        yield wait

    def _subscriptions(self, tables: dict):
        """Per subscription (queue_subscribe; labels schema, table, subscription whatever per_table
        says: a subscription's lag is the figure to alert on): its lag and its rows by state."""
        labels = ["schema", "table", "subscription"]
        families = {
            "pending_rows": GaugeMetricFamily("q4m_subscription_pending_rows",
                                              "Rows the subscription has not ended yet (its lag), held ones included.",
                                              labels=labels),
            "oldest_age_ms": GaugeMetricFamily("q4m_subscription_oldest_age_seconds",
                                               "Age of the oldest row the subscription has not ended (0: none).",
                                               labels=labels),
            "owned_rows": GaugeMetricFamily("q4m_subscription_owned_rows", "Rows its consumers hold now.",
                                            labels=labels),
            "dead_rows": GaugeMetricFamily("q4m_subscription_dead_rows",
                                           "Rows dead for the subscription (MAX_DELIVERIES).", labels=labels),
        }
        for (schema, table), st in sorted(tables.items()):
            for sub in st.get("subscriptions", []):
                values = [schema, table, sub["name"]]
                for key, family in families.items():
                    family.add_metric(values, sub[key] / 1000 if key.endswith("_ms") else sub[key])
        yield from families.values()

    def _engine(self, engine: dict):
        syncs = CounterMetricFamily("q4m_syncs", "fsync/fdatasync calls of the engine's data files.")
        syncs.add_metric([], engine.get("sys_sync", 0))
        yield syncs
        sync_s = CounterMetricFamily("q4m_sync_seconds", "Time spent inside those syncs; "
                                     "rate(q4m_sync_seconds_total) / rate(q4m_syncs_total) is the disk's sync latency.")
        sync_s.add_metric([], engine.get("sync_us", 0) / 1e6)
        yield sync_s
        memory = GaugeMetricFamily("q4m_engine_memory_bytes", "RAM the row indexes of all open queue tables hold.")
        memory.add_metric([], engine.get("memory_bytes", 0))
        yield memory
        for name, value in sorted(engine.items()):
            if name in ("sys_sync", "sync_us", "memory_bytes"):
                continue
            c = CounterMetricFamily(f"q4m_engine_{name}", f"SHOW ENGINE QUEUE STATUS: {name}.")
            c.add_metric([], value)
            yield c


def _le(seconds: float) -> str:
    return repr(float(seconds))


def registry(sampler: Sampler, per_table: bool) -> CollectorRegistry:
    r = CollectorRegistry(auto_describe=False)
    r.register(QueueCollector(sampler, per_table))
    return r
