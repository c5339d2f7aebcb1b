"""Random SQL against a real server: q4m's functions with random (mostly wrong) arguments in
random statement shapes, mixed with DML, DDL, LOCK TABLES, transactions and sync-mode switches,
from four connections at once, while a fifth interrupts them with KILL QUERY. Bad input must end in an SQL error, never a crash, a hang, a lost
connection or a "table is marked as crashed". The statement sequence is seeded (Q4M_FUZZ_SEED
reproduces it); the interleaving of the four connections is not."""
import os
import random
import threading
import time

import pymysql

from sqlcheck import wait_until

SEED = int(os.environ.get("Q4M_FUZZ_SEED", "20261124"))
STATEMENTS_PER_CONNECTION = 2500
CONNECTIONS = 4
TIME_BUDGET_S = 60  # a budget for the whole run, not an assertion: the workers just stop

TABLE_ARGS = [
    "q1", "q2", "inn", "vq", "nope", "fz.q1", "other.q1", "`q1`", "Q1", "q1 ", " q1", "", ":", "q1:",
    "q1:id>3", "q1:s='a1'", "q2:v%2=0", "q1:id>", "q1:(((", "q1:s LIKE 'x%'", "q1:id IN (1,2,3)",
    "q2:j IS NULL", "q1:d/0>1", "q1:t>'2020-01-01'", "q1:nosuch=1", "q1:id=?", "q1:b='x'",
    "q1:" + "(" * 300 + "1" + ")" * 300, "q1:" + "id+" * 2000 + "1", "q1:\u00e9=1", "q1:s='\u20ac'",
]
# Values that may stand anywhere but last in queue_wait() (a number there is an error).
ODD_VALUES = ["0", "1", "-1", "NULL", "'1'", "'abc'", "18446744073709551615", "1e300", "0.5",
              "(SELECT 1)", "id", "@unset", "CAST(1 AS DATETIME)", "X'00ff'", "REPEAT('q', 70000)"]
# queue_wait()'s last argument: never one that blocks for long (the test must not hang itself).
LAST_WAIT_ARGS = ["0", "0.05", "0.01", "-1", "NULL", "'abc'", "-0", "1e-300", "(SELECT 0)", "@unset", "''"]
FUNCTIONS = ["queue_end", "queue_abort", "queue_take_dead", "queue_rowid", "queue_delivery_count", "queue_renew_lease",
             "queue_set_srcid", "queue_compact", "queue_stats"]
OTHER_STATEMENTS = [
    "DELETE FROM q1 LIMIT 1", "UPDATE q1 SET id = 1", "SELECT COUNT(*) FROM q1",
    "SELECT * FROM q1 ORDER BY id LIMIT 2", "TRUNCATE q2", "SELECT * FROM q1 WHERE id = 1 FOR UPDATE",
    "SELECT * FROM q1 FOR UPDATE SKIP LOCKED", "LOCK TABLES q1 WRITE", "LOCK TABLES q1 READ, q2 WRITE",
    "UNLOCK TABLES", "BEGIN", "COMMIT", "ROLLBACK", "ALTER TABLE q2 ENGINE=QUEUE", "OPTIMIZE TABLE q1",
    "CHECK TABLE q1", "REPAIR TABLE q2", "ANALYZE TABLE q1", "SET GLOBAL queue_sync_mode = 'none'",
    "SET GLOBAL queue_sync_mode = 'fdatasync'", "HANDLER q1 OPEN", "HANDLER q1 READ NEXT",
    "HANDLER q1 CLOSE", "SELECT * FROM vq WHERE queue_wait('q1', 0)", "SHOW ENGINE QUEUE STATUS",
    "SELECT * FROM information_schema.QUEUE_TABLES", "SELECT * FROM information_schema.QUEUE_OWNED_ROWS",
    "INSERT INTO q2 SELECT * FROM q2 LIMIT 3",
    "REPLACE INTO q1 (id) VALUES (1)", "INSERT INTO q1 (id) VALUES (1) ON DUPLICATE KEY UPDATE id = 2",
    "CREATE TEMPORARY TABLE tq (v INT) ENGINE=QUEUE", "DROP TEMPORARY TABLE IF EXISTS tq",
    "SET SESSION queue_lease_timeout = 0.01", "SET SESSION queue_lease_timeout = 0",
    "SET SESSION queue_lease_timeout = -3", "SET SESSION queue_lease_timeout = 'x'",
    "ALTER TABLE q2 MAX_DELIVERIES=1", "ALTER TABLE q2 MAX_DELIVERIES=0", "ALTER TABLE q2 MAX_DELIVERIES=3",
    "ALTER TABLE q2 MESSAGE_GROUP_COLUMN='v'", "ALTER TABLE q2 MESSAGE_GROUP_COLUMN=''",
    "ALTER TABLE q2 MESSAGE_GROUP_COLUMN='j'", "ALTER TABLE q1 DROP COLUMN s",
    "ALTER TABLE q1 MAX_DELIVERIES=1", "ALTER TABLE q1 MAX_DELIVERIES=0",  # dead grouped rows revive
    "ALTER TABLE q1 VISIBLE_AT_COLUMN='s'",  # naming a VARCHAR's type once crashed the server
    "ALTER TABLE q1 MODIFY s VARCHAR(20) COMPRESSED", "ALTER TABLE q1 PARTITION BY HASH(id) PARTITIONS 2",
    "ALTER TABLE q2 ADD SYSTEM VERSIONING",
    "ALTER TABLE q1 MAX_ROWS=3", "ALTER TABLE q1 MAX_ROWS=0", "ALTER TABLE q2 MAX_ROWS=1",  # full: error 1114
    "ALTER TABLE q2 MAX_ROWS=0", "ALTER TABLE q1 DATA DIRECTORY='/tmp'", "ALTER TABLE q2 ROW_FORMAT=COMPRESSED",
    "ALTER TABLE q2 DEDUP_COLUMN='v'", "ALTER TABLE q2 DEDUP_COLUMN=''", "ALTER TABLE q2 DEDUP_COLUMN='j'",
    "ALTER TABLE q2 DEDUP_WINDOW=1", "ALTER TABLE q2 DEDUP_WINDOW=0", "ALTER TABLE q1 DEDUP_WINDOW=5",
    "ALTER TABLE q1 DEDUP_COLUMN='s' DEDUP_WINDOW=2",
]
LOST = (2006, 2013, 2003)
CRASHED = (1194, 1195)  # ER_CRASHED_ON_USAGE, ER_CRASHED_ON_REPAIR
UNCLEAR = (1105, 1030)  # ER_UNKNOWN_ERROR, ER_GET_ERRNO ("Got error N from storage engine")


def quoted(text):
    return "'" + text.replace("'", "''") + "'"


def wait_call(rng):
    args = [quoted(rng.choice(TABLE_ARGS)) if rng.random() < 0.75 else rng.choice(ODD_VALUES)
            for _ in range(rng.choice([0, 1, 1, 2, 3]))]
    args.append(rng.choice(LAST_WAIT_ARGS))
    return f"queue_wait({', '.join(args)})"


def other_call(rng):
    args = [quoted(rng.choice(TABLE_ARGS)) if rng.random() < 0.6 else rng.choice(ODD_VALUES)
            for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 4]))]
    return f"{rng.choice(FUNCTIONS)}({', '.join(args)})"


# Statement shapes around a function call, with their weights.
SHAPES = [
    (30, lambda rng, call: f"SELECT {call}"),
    (20, lambda rng, call: f"SELECT * FROM {rng.choice(['q1', 'q2', 'inn'])} WHERE {call}"),
    (8, lambda rng, call: f"INSERT INTO q1 (id, s, d) VALUES ({rng.randint(-5, 10)}, 'a{rng.randint(0, 9)}', "
                          f"{rng.random()})"),
    (4, lambda rng, call: f"INSERT INTO q2 (v, j) VALUES ({rng.randint(0, 100)}, NULL)"),
    (5, lambda rng, call: f"SELECT {call}, {other_call(rng)}"),
    (5, lambda rng, call: f"SELECT * FROM q1 AS a JOIN q2 AS b WHERE {call}"),
    (4, lambda rng, call: f"SELECT {call} FROM q1 GROUP BY id HAVING {call}"),
    (4, lambda rng, call: f"PREPARE st FROM {quoted('SELECT * FROM q1 WHERE ' + call)}"),
    (3, lambda rng, call: "EXECUTE st"),
    (17, lambda rng, call: rng.choice(OTHER_STATEMENTS)),
]


def statement(rng):
    call = wait_call(rng) if rng.random() < 0.5 else other_call(rng)
    shape = rng.choices([f for _, f in SHAPES], weights=[w for w, _ in SHAPES])[0]
    return shape(rng, call)


def processlist(server):
    rows = server.sql("SELECT ID, COMMAND, TIME, STATE, LEFT(INFO, 150) FROM information_schema.PROCESSLIST "
                      "WHERE COMMAND <> 'Sleep'")
    return "\n".join(f"  {r}" for r in rows)


def create_tables(server):
    server.sql("CREATE DATABASE fz")
    server.sql("CREATE TABLE fz.q1 (id INT, s VARCHAR(20), d DOUBLE, t DATETIME, b BLOB) ENGINE=QUEUE "
               "MESSAGE_GROUP_COLUMN='s'")
    server.sql("CREATE TABLE fz.q2 (v BIGINT UNSIGNED NOT NULL, j TEXT) ENGINE=QUEUE MAX_DELIVERIES=2")
    server.sql("CREATE TABLE fz.inn (v INT) ENGINE=InnoDB")
    server.sql("CREATE VIEW fz.vq AS SELECT * FROM fz.q1")


class Fuzzer:
    """CONNECTIONS workers sending random statements, and one connection sending KILL QUERY at
    random moments (every statement must survive being interrupted)."""

    def __init__(self, server):
        self.server = server
        self.deadline = time.monotonic() + TIME_BUDGET_S
        self.failures, self.errors_seen, self.executed = [], {}, 0
        self.lock = threading.Lock()
        self.worker_ids, self.stop_killing = [], threading.Event()
        self.server_killed = False  # set before a kill -9: lost connections are then expected

    def start(self):
        self.threads = [threading.Thread(target=self.worker, args=(n,)) for n in range(CONNECTIONS)]
        self.threads.append(threading.Thread(target=self.killer))
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads[:-1]:
            t.join()
        self.stop_killing.set()
        self.threads[-1].join()

    def worker(self, n):
        try:
            c = self.server.connect(db="fz", read_timeout=30)
        except pymysql.err.MySQLError:
            if self.server_killed:
                return
            raise
        try:
            self.run_statements(n, c)
        except Exception as e:  # noqa: BLE001 - a dying worker must fail the test, not vanish
            if not self.server_killed:
                with self.lock:
                    self.failures.append(f"worker {n}: {e!r}")
        finally:
            try:
                c.close()  # its LOCK TABLES, transaction or HANDLER would hold metadata locks
            except pymysql.err.Error:
                pass  # kill9() closed it already

    def run_statements(self, n, c):
        rng = random.Random(SEED * 100 + n)
        # Statements in this test wait at most a few seconds (short queue_wait timeouts, a
        # 3 s lock wait): a statement still running after 30 s (the read timeout) is a hang.
        with c.cursor() as cur:
            cur.execute("SET SESSION lock_wait_timeout = 3")
        with self.lock:
            self.worker_ids.append(c.thread_id())  # only now: the SET above must not be killed
        release, release_after = None, 0  # LOCK TABLES / BEGIN hold their locks a few statements only
        for _ in range(STATEMENTS_PER_CONNECTION):
            if time.monotonic() > self.deadline or self.failures:
                return
            if release and release_after == 0:
                sql, release = release, None
            else:
                sql = statement(rng)
                release_after -= 1
                if release is None and sql.startswith(("LOCK TABLES", "BEGIN")):
                    release = "UNLOCK TABLES" if sql.startswith("LOCK") else rng.choice(["COMMIT", "ROLLBACK"])
                    release_after = rng.randint(1, 5)
            try:
                with c.cursor() as cur:
                    cur.execute(sql)
                    cur.fetchall()
            except pymysql.err.MySQLError as e:
                if not self.record_error(sql, e):
                    return
            with self.lock:
                self.executed += 1

    def record_error(self, sql, e):
        """Counts an error; False if the connection is gone."""
        code = e.args[0] if e.args and isinstance(e.args[0], int) else -1
        text = str(e)
        with self.lock:
            self.errors_seen[code] = self.errors_seen.get(code, 0) + 1
            if code in LOST:
                if not self.server_killed:
                    self.failures.append(f"connection lost on {sql[:200]!r}: {text}\n{processlist(self.server)}")
                return False
            if code in CRASHED or code in UNCLEAR or "crashed" in text:
                self.failures.append(f"{sql[:200]!r}: {text}")
        return True

    def killer(self):
        rng = random.Random(SEED)
        try:
            k = self.server.connect(db="fz")
        except pymysql.err.MySQLError:
            return
        while not self.stop_killing.wait(rng.uniform(0.002, 0.02)):
            with self.lock:
                ids = list(self.worker_ids)
            if ids:
                try:
                    with k.cursor() as cur:
                        cur.execute(f"KILL QUERY {rng.choice(ids)}")
                except (pymysql.err.MySQLError, AttributeError) as e:
                    # kill9() closes this connection from another thread: pymysql then fails
                    # with AttributeError (its socket became None mid-call) or a MySQLError.
                    if self.server_killed:
                        return
                    if not isinstance(e, pymysql.err.MySQLError):
                        raise
                    # else the worker's connection has just gone (ER_NO_SUCH_THREAD)

    def report(self):
        assert not self.failures, "\n".join(self.failures[:5]) + f"\n(seed {SEED})"
        print(f"seed {SEED}: {self.executed} statements, errors by code: {dict(sorted(self.errors_seen.items()))}")


def check_tables_work(server):
    """Every table opens and reads; a row goes in and comes out; no error in the log."""
    server.sql("SET GLOBAL queue_sync_mode = 'fdatasync'")
    c = server.connect(db="fz")
    with c.cursor() as cur:
        for table in ("q1", "q2"):
            cur.execute(f"SELECT COUNT(*) FROM {table}")
            count = cur.fetchone()[0]
            cur.execute(f"SELECT * FROM {table}")
            assert len(cur.fetchall()) == count
        cur.execute("TRUNCATE q2")
        cur.execute("INSERT INTO q2 (v) VALUES (424242)")
        cur.execute("SELECT v FROM q2 WHERE queue_wait('q2', 5)")
        assert cur.fetchall() == ((424242,),)
        cur.execute("SELECT queue_end()")
    log = server.err_log_since_start()
    assert "[ERROR]" not in log, log[-3000:]


def test_random_sql_gets_sql_errors_only(fresh_server):
    server = fresh_server
    create_tables(server)
    fuzz = Fuzzer(server)
    fuzz.start()
    fuzz.join()
    server.check_alive("after the random statements")
    fuzz.report()
    assert fuzz.executed > 100  # the run did something (each connection gets at least a few seconds)
    check_tables_work(server)


def test_random_sql_then_kill9_recovers(fresh_server):
    """kill -9 in the middle of the random statements (compactions, TRUNCATE, ALTER, sync-mode
    switches in flight): the restarted server opens every table, nothing is "crashed"."""
    server = fresh_server
    create_tables(server)
    fuzz = Fuzzer(server)
    fuzz.start()
    wait_until(lambda: fuzz.executed >= 2000 or fuzz.failures or not any(t.is_alive() for t in fuzz.threads[:-1]),
               timeout=TIME_BUDGET_S, what="2000 random statements")
    fuzz.server_killed = True
    server.kill9()
    fuzz.join()
    fuzz.report()
    server.start()
    check_tables_work(server)
    server.restart()  # and a clean shutdown and start after that
    check_tables_work(server)
