"""The worker's own counters: a dict for code, Prometheus text for scrapers."""
import threading

COUNTERS = {
    "taken": "jobs taken from the queue (queue_wait() returned a row)",
    "succeeded": "jobs whose handler returned and whose queue_end() (and COMMIT) succeeded",
    "failed": "jobs whose handler raised (or whose transactional COMMIT failed)",
    "aborted": "jobs given back with queue_abort() (retry backoff, or at a stop deadline)",
    "dead": "failed jobs at the table's MAX_DELIVERIES: dead letters after their abort",
    "lease_lost": "jobs whose lease ran out before their end (error 1205): not removed",
    "uncertain_ends": "connection lost during queue_end()/COMMIT: removed or back in the queue",
    "given_back": "jobs given back at a stop deadline (handler still running)",
    "reconnects": "connections made again after a lost one",
}


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self._counts = {name: 0 for name in COUNTERS}
        self._in_flight = 0

    def inc(self, name, n=1):
        with self._lock:
            self._counts[name] += n

    def add_in_flight(self, n):
        with self._lock:
            self._in_flight += n

    def snapshot(self):
        with self._lock:
            out = dict(self._counts)
            out["in_flight"] = self._in_flight
            return out


def _label(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(snapshot, table, prefix="q4m_worker"):
    """Prometheus text exposition of one worker's metrics() dict."""
    lines = []
    lab = f'{{table="{_label(table)}"}}'
    for name, help_text in COUNTERS.items():
        metric = f"{prefix}_{name}_total"
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter",
                  f"{metric}{lab} {snapshot.get(name, 0)}"]
    metric = f"{prefix}_in_flight"
    lines += [f"# HELP {metric} jobs whose handler is running", f"# TYPE {metric} gauge",
              f"{metric}{lab} {snapshot.get('in_flight', 0)}"]
    return "\n".join(lines) + "\n"
