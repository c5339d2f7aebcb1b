"""Consuming: a Worker runs a handler for each row of a QUEUE table, on N threads.

Each thread has its own connection and takes rows in owner mode
(`SELECT t.* FROM t WHERE queue_wait('t', timeout)`). While the handler runs a heartbeat
renews the row's lease (`queue_renew_lease()`); on success the thread ends the row
(`queue_end()`), on an exception it gives it back with `queue_abort(backoff)`. With
`transactional=True` the handler writes through `job.conn` inside a transaction that the
worker commits together with the row's `queue_end()` (docs/transactions.md).
"""
import logging
import signal
import threading
import time

import pymysql

from .backoff import backoff_delay
from .errors import JobAbandoned, is_connection_lost, is_lease_lost
from .metrics import Metrics, prometheus_text
from .producer import table_options
from .sql import check_subscription, quote_table, split_table

log = logging.getLogger("q4m_worker")

_DC = "__q4m_delivery_count"
_RID = "__q4m_rowid"


def exactly_once(handler):
    """Marks a handler transactional: Worker(handler=...) then runs it with transactional=True."""
    handler._q4m_transactional = True
    return handler


class Job:
    """One row handed to a handler.

    row: the row as a dict; rowid: queue_rowid(); delivery_count: queue_delivery_count()
    (1 the first time); conn: in transactional mode, the connection inside the job's
    transaction (write your InnoDB rows through it; do not commit or roll back: the worker
    does); lease_lost: an Event set if the heartbeat found the lease gone (the row went back
    to the queue: a long handler may check it and give up early)."""

    def __init__(self, table, row, rowid, delivery_count, conn=None):
        self.table, self.row = table, row
        self.rowid, self.delivery_count = rowid, delivery_count
        self.conn = conn
        self.lease_lost = threading.Event()
        self.started = time.monotonic()

    def __repr__(self):
        return (f"Job(table={self.table!r}, rowid={self.rowid}, "
                f"delivery_count={self.delivery_count})")


class _Session:
    """A worker thread's connection. `lock` serialises it between the thread (and its
    transactional handler), the heartbeat and a stop that gives the job back."""

    def __init__(self, index):
        self.index = index
        self.lock = threading.RLock()
        self.conn = None
        self.thread_id = None
        self.job = None          # the job in hand, set and cleared under lock
        self.abandoned = False   # the job was given back by stop(): do not end it
        self.connected_once = False

    def execute(self, sql, args=None):
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()


class _LockedCursor:
    """A cursor of the job's connection that takes the session lock per statement, so the
    heartbeat's renewals and the handler's statements do not interleave on the wire."""

    def __init__(self, session, cursor):
        self._s, self._c = session, cursor

    def _check(self):
        if self._s.abandoned or self._s.conn is None:
            raise JobAbandoned("q4m: this job was given back (stop deadline or lost lease); "
                               "its transaction was rolled back")

    def execute(self, sql, args=None):
        with self._s.lock:
            self._check()
            return self._c.execute(sql, args)

    def executemany(self, sql, args):
        with self._s.lock:
            self._check()
            return self._c.executemany(sql, args)

    def __getattr__(self, name):
        return getattr(self._c, name)

    def __iter__(self):
        return iter(self._c)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._c.close()


class HandlerConnection:
    """What a transactional handler gets as job.conn: cursors of the job's connection, inside
    the job's transaction. commit() and rollback() are the worker's: they raise here."""

    def __init__(self, session):
        self._s = session

    def cursor(self, cursor=None):
        self._check()
        conn = self._s.conn
        return _LockedCursor(self._s, conn.cursor(cursor) if cursor else conn.cursor())

    def execute(self, sql, args=None):
        """Runs one statement in the job's transaction; returns its rows."""
        with self.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def _check(self):
        if self._s.abandoned or self._s.conn is None:
            raise JobAbandoned("q4m: this job was given back; its transaction was rolled back")

    def commit(self):
        raise RuntimeError("q4m: a transactional handler must not commit: the worker commits "
                           "its writes together with the row's queue_end()")

    rollback = begin = commit

    def escape(self, value):
        return self._s.conn.escape(value)

    def thread_id(self):
        return self._s.thread_id


class _Heartbeat(threading.Thread):
    """Renews the lease of the session's job every `interval` seconds while it is in hand."""

    def __init__(self, worker, session, interval):
        super().__init__(name=f"{worker.name}-heartbeat-{session.index}", daemon=True)
        self.w, self.s, self.interval = worker, session, interval
        self.cond = threading.Condition()
        self.job = None
        self.exit = False

    def begin(self, job):
        with self.cond:
            self.job = job
            self.cond.notify()

    def end(self):
        with self.cond:
            self.job = None
            self.cond.notify()

    def shutdown(self):
        with self.cond:
            self.exit = True
            self.cond.notify()

    def run(self):
        while True:
            with self.cond:
                while self.job is None and not self.exit:
                    self.cond.wait()
                if self.exit:
                    return
                job = self.job
                due = time.monotonic() + self.interval
                while self.job is job and not self.exit and time.monotonic() < due:
                    self.cond.wait(max(0.0, due - time.monotonic()))
                if self.job is not job or self.exit:
                    continue
            self._renew(job)

    def _renew(self, job):
        # Under the session lock, and only while the job is still in hand: a renewal after
        # queue_end() would read "does not own a row" as a lost lease.
        if not self.s.lock.acquire(timeout=self.interval):
            return  # a long statement of the handler holds the connection; try next beat
        try:
            if self.s.job is not job or self.s.abandoned or self.s.conn is None:
                return
            if self.w.job_timeout and time.monotonic() - job.started > self.w.job_timeout:
                # A hung handler must not keep its row for ever: stop renewing, so the lease
                # runs out and the row goes to another worker.
                log.warning("%s: row %s: handler running for more than job_timeout (%s s): "
                            "no more lease renewals", self.w.name, job.rowid, self.w.job_timeout)
                with self.cond:
                    if self.job is job:
                        self.job = None
                return
            try:
                self.s.execute("SELECT queue_renew_lease()")
            except pymysql.MySQLError as e:
                if is_connection_lost(e):
                    return  # the worker thread finds out at its next statement
                # 1205 (expired) or 1210 (released by queue_release_owned: owns nothing)
                log.warning("%s: lease of row %s lost while its handler ran: %s",
                            self.w.name, job.rowid, e)
                job.lease_lost.set()
                with self.cond:
                    if self.job is job:
                        self.job = None
        finally:
            self.s.lock.release()


class Worker:
    """Runs `handler(job)` for each row of `table`, on `threads` threads.

    connect: a function returning a new PyMySQL connection (called per thread, and again
      after a lost connection).
    table: 'jobs' or 'db.jobs'; condition: an optional condition on the rows taken ('prio > 3').
    subscription: consume the table's subscription of that name (queue_subscribe) instead of
      the table itself: queue_wait('jobs@name'); retries, leases and dead letters are then the
      subscription's. With transactional=True the subscription's end commits in the job's
      transaction (docs/sql-api.md, "Subscriptions").
    transactional: run each job in a transaction with its queue_end() (exactly-once for the
      InnoDB rows the handler writes through job.conn). Also set by @exactly_once.
    wait_timeout: seconds each queue_wait() blocks (how quickly an idle thread sees stop()).
    lease_timeout: the session's queue_lease_timeout (None or 0: no lease, no heartbeat).
    heartbeat_interval: seconds between renewals (default lease_timeout / 3).
    job_timeout: seconds after which the heartbeat stops renewing a job's lease (None: never),
      so that a hung handler's row goes back to the queue one lease later.
    backoff_base, backoff_cap, backoff_jitter: queue_abort() delays (backoff.backoff_delay).
    stop_deadline: seconds stop() lets running handlers finish before giving their jobs back.
    processes: run() forks this many processes, each running `threads` threads (1: none;
      see processes.run_processes).
    on_dead: on_dead(job, exc) when a failed job reaches the table's MAX_DELIVERIES: its abort
      made it a dead letter (queue_take_dead() / queue_redrive_dead()).
    """

    def __init__(self, connect, table, handler, threads=1, condition=None, subscription=None, transactional=None,
                 wait_timeout=1.0, lease_timeout=30.0, heartbeat=True, heartbeat_interval=None,
                 job_timeout=None,
                 backoff_base=1.0, backoff_cap=300.0, backoff_jitter=0.2, stop_deadline=30.0,
                 on_dead=None, processes=1, reconnect_delay=0.1, reconnect_max_delay=5.0,
                 name=None):
        if threads < 1:
            raise ValueError(f"q4m: threads must be >= 1, not {threads!r}")
        split_table(table)  # validates
        self.connect, self.table, self.handler, self.threads = connect, table, handler, threads
        self.spec = table + (f"@{check_subscription(subscription)}" if subscription is not None else "") \
            + (f":{condition}" if condition else "")
        self.subscription = subscription
        if transactional is None:
            transactional = bool(getattr(handler, "_q4m_transactional", False))
        self.transactional = transactional
        self.wait_timeout = float(wait_timeout)
        self.lease_timeout = float(lease_timeout or 0)
        self.heartbeat = bool(heartbeat) and self.lease_timeout > 0
        self.heartbeat_interval = float(heartbeat_interval or self.lease_timeout / 3.0 or 1.0)
        self.job_timeout = float(job_timeout) if job_timeout else None
        self.backoff = dict(base=backoff_base, cap=backoff_cap, jitter=backoff_jitter)
        backoff_delay(1, **self.backoff)  # validates
        self.stop_deadline = float(stop_deadline)
        self.on_dead = on_dead
        if processes < 1:
            raise ValueError(f"q4m: processes must be >= 1, not {processes!r}")
        self.processes = processes
        self.reconnect_delay, self.reconnect_max_delay = reconnect_delay, reconnect_max_delay
        self.name = name or f"q4m-worker[{table}{'@' + subscription if subscription else ''}]"
        self._metrics = Metrics()
        self._stopping = threading.Event()
        self._stop_requested = threading.Event()
        self._sessions = []
        self._threads = []
        self._max_deliveries = None
        self._take_sql = (f"SELECT {quote_table(table)}.*, queue_delivery_count() AS `{_DC}`, "
                          f"queue_rowid() AS `{_RID}` FROM {quote_table(table)} "
                          f"WHERE queue_wait(%s, %s)")

    # ---- public ------------------------------------------------------------------
    def start(self):
        """Starts the threads and returns."""
        if self._threads:
            raise RuntimeError("q4m: worker already started")
        for i in range(self.threads):
            s = _Session(i)
            t = threading.Thread(target=self._thread_main, args=(s,), daemon=True,
                                 name=f"{self.name}-{i}")
            self._sessions.append(s)
            self._threads.append(t)
            t.start()
        return self

    def run(self, install_signal_handlers=True):
        """Starts, then blocks until SIGTERM/SIGINT (in the main thread) or request_stop();
        then stops gracefully (stop_deadline). With processes > 1, forks them and waits for
        them instead (run_processes)."""
        if self.processes > 1 and not self._threads:
            from .processes import run_processes
            n, self.processes = self.processes, 1  # each child runs threads, not processes
            try:
                return run_processes(self, n)
            finally:
                self.processes = n
        old = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old[sig] = signal.signal(sig, lambda *_: self._stop_requested.set())
        try:
            self.start()
            while not self._stop_requested.wait(0.2):
                if not any(t.is_alive() for t in self._threads):
                    break
            return self.stop()
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)

    def request_stop(self):
        """Makes run() return (a stop from a signal handler or another thread)."""
        self._stop_requested.set()

    def stop(self, deadline=None):
        """Stops taking rows; lets handlers in flight finish for up to `deadline` seconds
        (default stop_deadline), then gives their jobs back (queue_abort(), or KILL of the
        connection if it is busy): their rows are handed out again, their handlers' results
        ignored. Returns True if every handler finished in time."""
        self._stopping.set()
        self._stop_requested.set()
        end = time.monotonic() + (self.stop_deadline if deadline is None else float(deadline))
        for t in self._threads:
            t.join(max(0.0, end - time.monotonic()))
        in_time = True
        for s in self._sessions:
            if s.job is not None:
                in_time = False
                self._give_back(s)
        for t in self._threads:
            t.join(max(1.0, self.wait_timeout + 1.0) if not in_time else 0.5)
        return in_time

    def metrics(self):
        """Counters (metrics.COUNTERS) and the in_flight gauge, as a dict."""
        return self._metrics.snapshot()

    def prometheus_text(self, prefix="q4m_worker"):
        return prometheus_text(self.metrics(), self.table, prefix)

    # ---- a thread ----------------------------------------------------------------
    def _thread_main(self, s):
        hb = None
        if self.heartbeat:
            hb = _Heartbeat(self, s, self.heartbeat_interval)
            hb.start()
        try:
            while not self._stopping.is_set():
                try:
                    if s.conn is None and not self._connect(s):
                        break
                    job = self._take(s)
                    if job is not None:
                        self._process(s, job, hb)
                except pymysql.MySQLError as e:
                    if not is_connection_lost(e):
                        log.error("%s: %s", self.name, e)
                        time.sleep(min(1.0, self.wait_timeout))
                    self._drop(s)
                except Exception:
                    log.exception("%s: unexpected error; reconnecting", self.name)
                    self._drop(s)
                    time.sleep(min(1.0, self.wait_timeout))
        finally:
            if hb is not None:
                hb.shutdown()
            with s.lock:
                self._drop(s)  # closing gives back nothing owned: no row is in hand here

    def _connect(self, s):
        delay = self.reconnect_delay
        while not self._stopping.is_set():
            conn = None
            try:
                conn = self.connect()
                conn.autocommit(True)
                with conn.cursor() as cur:
                    if self.lease_timeout > 0:
                        cur.execute("SET SESSION queue_lease_timeout = %s", (self.lease_timeout,))
                    if self._max_deliveries is None:
                        self._max_deliveries = table_options(conn, self.table).max_deliveries
                with s.lock:
                    s.conn, s.thread_id, s.abandoned = conn, conn.thread_id(), False
                if s.connected_once:
                    self._metrics.inc("reconnects")
                    log.info("%s: reconnected (connection id %s)", self.name, s.thread_id)
                s.connected_once = True
                return True
            except Exception as e:
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
                if not isinstance(e, pymysql.MySQLError) or not is_connection_lost(e):
                    # a missing table, an engine not loaded: say so at each retry
                    log.error("%s: cannot set up a connection: %s", self.name, e)
                self._stopping.wait(delay)
                delay = min(self.reconnect_max_delay, delay * 2)
        return False

    def _drop(self, s):
        with s.lock:
            conn, s.conn, s.job = s.conn, None, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _take(self, s):
        with s.conn.cursor() as cur:
            cur.execute(self._take_sql, (self.spec, self.wait_timeout))
            rows = cur.fetchall()
            names = [d[0] for d in cur.description]
        if not rows:
            return None  # timed out: owner mode owning nothing, which the next wait ends
        row = dict(zip(names, rows[0]))
        dc, rid = row.pop(_DC), row.pop(_RID)
        self._metrics.inc("taken")
        return Job(self.table, row, rid, dc, HandlerConnection(s) if self.transactional else None)

    def _process(self, s, job, hb):
        with s.lock:
            s.job, s.abandoned = job, False
        self._metrics.add_in_flight(1)
        try:
            if self.transactional:
                with s.lock:
                    s.execute("BEGIN")
            if hb is not None:
                hb.begin(job)
            error = None
            try:
                self.handler(job)
            except Exception as e:
                error = e
            finally:
                if hb is not None:
                    hb.end()
            with s.lock:
                if s.abandoned or s.conn is None:
                    # stop() gave the job back (its connection is closed), or the connection
                    # died under the handler (the server gave the row back).
                    s.job = None
                    return
                s.job = None
                if job.lease_lost.is_set():
                    # The heartbeat saw the row go back: never end it; undo the job's writes.
                    self._metrics.inc("lease_lost")
                    self._rollback(s)
                    try:
                        s.execute("SELECT queue_abort()")  # leaves owner mode if still in it
                    except pymysql.MySQLError as e:
                        if is_connection_lost(e):
                            raise
                    return
                if error is not None and self.transactional and is_connection_lost(error):
                    raise error  # the job's own connection died: the server gave the row back
                if error is None:
                    self._end(s, job)
                else:
                    self._fail(s, job, error)
        finally:
            self._metrics.add_in_flight(-1)

    def _rollback(self, s):
        if self.transactional:
            s.conn.rollback()

    def _end(self, s, job):
        try:
            s.execute("SELECT queue_end()")
            if self.transactional:
                s.conn.commit()
        except pymysql.MySQLError as e:
            if is_lease_lost(e):
                # The row went back to the queue: another worker will do it again. Never retry
                # the end (the row is no longer ours); a transaction's writes are rolled back.
                log.warning("%s: row %s: %s", self.name, job.rowid, e)
                self._metrics.inc("lease_lost")
                self._rollback(s)
                return
            if is_connection_lost(e):
                # Removed (the commit got through) or back in the queue: never end it twice.
                log.warning("%s: row %s: connection lost while ending it (%s); it was either "
                            "removed or goes back to the queue", self.name, job.rowid, e)
                self._metrics.inc("uncertain_ends")
                raise
            # A COMMIT refused (MAX_ROWS of an outbox insert, a deadlock...): the transaction
            # is rolled back and its queue_end() with it, so the row is back in the queue.
            log.error("%s: row %s: ending it failed: %s", self.name, job.rowid, e)
            self._metrics.inc("failed")
            self._rollback(s)
            if self._owns(s):
                s.execute("SELECT queue_abort(%s)", (self._delay(job),))
                self._metrics.inc("aborted")
            return
        self._metrics.inc("succeeded")

    def _owns(self, s):
        try:
            return s.execute("SELECT queue_rowid()")[0][0] is not None
        except pymysql.MySQLError:
            return False

    def _delay(self, job):
        return round(backoff_delay(job.delivery_count, **self.backoff), 3)

    def _fail(self, s, job, error):
        log.warning("%s: row %s (delivery %s) failed: %r", self.name, job.rowid,
                    job.delivery_count, error)
        self._metrics.inc("failed")
        self._rollback(s)
        s.execute("SELECT queue_abort(%s)", (self._delay(job),))
        self._metrics.inc("aborted")
        if self._max_deliveries and job.delivery_count >= self._max_deliveries:
            self._metrics.inc("dead")
            if self.on_dead is not None:
                try:
                    self.on_dead(job, error)
                except Exception:
                    log.exception("%s: on_dead callback failed", self.name)

    def _give_back(self, s):
        """At the stop deadline: the handler still runs; give its row back now and close the
        connection, so that nothing it does later can end the row or commit."""
        got = s.lock.acquire(timeout=1.0)
        try:
            if s.job is None:
                return
            s.abandoned = True
            self._metrics.inc("given_back")
            self._metrics.inc("aborted")
            log.warning("%s: stop deadline: giving row %s back", self.name, s.job.rowid)
            if got and s.conn is not None:
                try:
                    self._rollback(s)
                    s.execute("SELECT queue_abort()")
                except pymysql.MySQLError:
                    pass
                conn, s.conn = s.conn, None
                try:
                    conn.close()
                except Exception:
                    pass
                return
            # The handler is inside a statement on the connection: end it from outside. The
            # server rolls its transaction back and gives the row back, as queue_abort() does.
            try:
                c = self.connect()
                try:
                    with c.cursor() as cur:
                        cur.execute("KILL CONNECTION %s", (s.thread_id,))
                finally:
                    c.close()
            except pymysql.MySQLError as e:
                log.error("%s: could not give row %s back: %s", self.name, s.job.rowid, e)
        finally:
            if got:
                s.lock.release()
