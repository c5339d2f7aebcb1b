"""The sampler: polls the server every few seconds (one query for every table's state and
counters, one for the engine's global counters) and keeps the last hour in a ring buffer
for the plots; the metrics endpoint serves the latest sample."""
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import pymysql

from . import db
from .config import Config

log = logging.getLogger("q4m-monitor")

# queue_stats() of every QUEUE table the sampling account may SELECT from, in one statement.
# Names are passed quoted (db.TABLE_ARGUMENT_SQL): any name, `t:x` or `a.b`, reaches the engine whole.
STATS_QUERY = (f"SELECT TABLE_SCHEMA, TABLE_NAME, queue_stats({db.TABLE_ARGUMENT_SQL}) "
               "FROM information_schema.QUEUE_TABLES")
ONE_TABLE_QUERY = STATS_QUERY + " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
LIST_QUERY = "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.QUEUE_TABLES"


def _lost(e: pymysql.err.MySQLError) -> bool:
    """The connection is gone (the poll fails and reconnects), as opposed to a table's error."""
    return isinstance(e, pymysql.err.OperationalError) and e.args[0] in (2006, 2013)


@dataclass
class Sample:
    at: float                                          # time.time()
    tables: dict = field(default_factory=dict)         # (schema, table) -> queue_stats() dict
    engine: dict = field(default_factory=dict)         # SHOW ENGINE QUEUE STATUS name -> value
    ok: bool = True
    error: str = ""


@dataclass
class Point:
    """What the plots need of one sample, per table: (ready, owned, delayed, dead, inserted,
    consumed). The ring buffer holds these, not whole samples: an hour of them is ~150 KB a table."""
    at: float
    ok: bool
    tables: dict


def ready_rows(s: dict) -> int:
    """Rows a consumer could be handed now or once their turn comes: neither owned, delayed nor dead."""
    return max(0, s["rows"] - s["owned_rows"] - s["delayed_rows"] - s["dead_rows"])


INSERTED, CONSUMED = 4, 5  # positions in a Point's tuples


def rate(prev: tuple | None, cur: tuple, i: int, dt: float) -> float:
    """Per-second growth of counter i; a table reopened since (counters restart) counts from 0."""
    if prev is None or dt <= 0:
        return 0.0
    d = cur[i] - prev[i]
    return (d if d >= 0 else cur[i]) / dt


def point(s: Sample) -> Point:
    return Point(s.at, s.ok, {k: (ready_rows(t), t["owned_rows"], t["delayed_rows"], t["dead_rows"],
                                  t["rows_inserted"], t.get("rows_consumed", 0)) for k, t in s.tables.items()})


class Sampler:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self._conn = None
        self._lock = threading.Lock()
        self._points: deque[Point] = deque(maxlen=max(2, int(cfg.history / cfg.interval) + 1))
        self._latest: Sample | None = None
        self._failing: set = set()  # (schema, table) that failed the one statement: asked on their own
        self._stop = threading.Event()
        self._thread = None
        self.polls = 0

    # ---- polling ----------------------------------------------------------
    def start(self):
        self.poll_once()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def _run(self):
        next_at = time.monotonic() + self.cfg.interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += self.cfg.interval
            if next_at < time.monotonic():  # fell behind (a slow server): no burst of polls
                next_at = time.monotonic() + self.cfg.interval
            self.poll_once()

    def poll_once(self) -> Sample:
        s = Sample(at=time.time())
        try:
            if self._conn is None:
                self._conn = db.connect(self.cfg, self.cfg.user, self.cfg.password)
            s.tables = self._table_stats()
            s.engine = {name: int(v) for _, name, v in db.rows(self._conn, "SHOW ENGINE QUEUE STATUS")}
        except pymysql.MySQLError as e:
            s.ok, s.error = False, str(e)
            log.warning("poll failed: %s", e)
            self._close()
        p = point(s)
        with self._lock:
            self._latest = s
            self._points.append(p)
            self.polls += 1
        return s

    def _table_stats(self) -> dict:
        # One statement for all tables except those that failed it before: each of these is asked
        # on its own, so that one table that fails (dropped between the listing and its
        # queue_stats(), damaged) costs one statement, not one per table on every poll.
        failing = sorted(self._failing)
        where, args = "", None
        if failing:
            where = " WHERE (TABLE_SCHEMA, TABLE_NAME) NOT IN (" + ", ".join(["(%s, %s)"] * len(failing)) + ")"
            args = [name for key in failing for name in key]
        try:
            found = db.rows(self._conn, STATS_QUERY + where, args)
        except pymysql.err.MySQLError as e:
            if _lost(e):
                raise
            found = [r for key in db.rows(self._conn, LIST_QUERY + where, args) for r in self._one_table(key)]
        for key in failing:
            found += self._one_table(key)
        return {(schema, table): json.loads(text) for schema, table, text in found if text}

    def _one_table(self, key: tuple) -> list:
        """[(schema, table, queue_stats)] of one table, [] if it is gone or fails (warned once)."""
        try:
            found = db.rows(self._conn, ONE_TABLE_QUERY, key)
        except pymysql.err.MySQLError as e:
            if _lost(e):
                raise
            if key not in self._failing:
                self._failing.add(key)
                log.warning("%s.%s skipped: %s", key[0], key[1], e)
            return []
        if key in self._failing:
            self._failing.discard(key)
            if found:
                log.info("%s.%s is read again", key[0], key[1])
        return found

    def _close(self):
        try:
            if self._conn:
                self._conn.close()
        except Exception:
            pass
        self._conn = None

    # ---- reading ----------------------------------------------------------
    def latest(self) -> Sample | None:
        with self._lock:
            return self._latest

    def window_start(self, now: float) -> float:
        """Where the plots' time axis starts: an hour ago, or the first sample if later."""
        with self._lock:
            first = self._points[0].at if self._points else now
        return max(now - self.cfg.history, min(first, now - self.cfg.interval))

    def points(self) -> list[Point]:
        with self._lock:
            return list(self._points)

    def series(self, key: tuple, since: float) -> dict:
        """For one table: time series of depth by state and of in/out rates (rows/s) since `since`."""
        out = {k: [] for k in ("ready", "owned", "delayed", "dead", "in", "out")}
        prev = None
        for p in self.points():
            t = p.tables.get(key) if p.ok else None
            if t is None:
                prev = None
                continue
            if p.at >= since:
                for i, name in enumerate(("ready", "owned", "delayed", "dead")):
                    out[name].append((p.at, t[i]))
                if prev is not None:
                    dt = p.at - prev[0]
                    out["in"].append((p.at, rate(prev[1], t, INSERTED, dt)))
                    out["out"].append((p.at, rate(prev[1], t, CONSUMED, dt)))
            prev = (p.at, t)
        return out

    def recent_rates(self, key: tuple, window: float = 60.0) -> tuple[float, float]:
        """In and out rows/s of one table over about the last `window` seconds."""
        points = [p for p in self.points() if p.ok and key in p.tables]
        if len(points) < 2:
            return 0.0, 0.0
        last = points[-1]
        first = next((p for p in points if p.at >= last.at - window), points[0])
        if first is last:
            first = points[-2]
        dt = last.at - first.at
        a, b = first.tables[key], last.tables[key]
        return rate(a, b, INSERTED, dt), rate(a, b, CONSUMED, dt)
