"""kill -9 in the middle of ALTER TABLE, RENAME TABLE, CREATE and DROP of queue tables.

MariaDB's DDL log replays or undoes an interrupted DDL statement at the next start, and it calls
the engine's rename and drop again for steps that may already have happened. After every restart:
the error log has no [ERROR] (the server logs a failed replay there), the queue table is back
under its name, every row whose INSERT returned OK is there exactly once with its payload, and
nothing else is. Q4M_DDL_CRASH_CYCLES sets the number of kills (default 12)."""
import os
import random
import threading

import pymysql

from sqlcheck import wait_until

CYCLES = int(os.environ.get("Q4M_DDL_CRASH_CYCLES", "12"))
SEED = int(os.environ.get("Q4M_DDL_CRASH_SEED", "4242"))
DDL = [
    "ALTER TABLE q ADD COLUMN IF NOT EXISTS extra INT",
    "ALTER TABLE q DROP COLUMN IF EXISTS extra",
    "ALTER TABLE q ENGINE=QUEUE",                 # a full copy into #sql-alter and back
    "ALTER TABLE q COMMENT='rebuilt'",
    "RENAME TABLE q TO q_moved, q_moved TO q",    # two renames, one DDL log entry
    "CREATE TABLE IF NOT EXISTS spare (id INT) ENGINE=QUEUE",
    "INSERT INTO spare VALUES (1)",
    "DROP TABLE IF EXISTS spare",
]


def payload(mid):
    return f"m{mid:07d}-" + "x" * (mid % 50)


class Load:
    """One connection runs DDL back to back, another inserts; both stop at the kill."""

    def __init__(self, server, rng, next_id):
        self.server, self.rng = server, rng
        self.next_id = next_id
        self.acked, self.attempted = set(), set()
        self.ddl_done = 0
        self.killed = threading.Event()
        self.errors = []
        self.threads = [threading.Thread(target=self.run_ddl), threading.Thread(target=self.produce)]

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join(30)
            assert not t.is_alive(), "a client thread hung after the kill"

    def _statements(self, conn, pick):
        with conn.cursor() as cur:
            while not self.killed.is_set():
                try:
                    pick(cur)
                except pymysql.MySQLError as e:
                    if self.killed.is_set():
                        return  # the kill cut the statement short: expected
                    if e.args and e.args[0] in (1146, 1213, 1205):  # spare not there, deadlock, lock wait
                        continue
                    self.errors.append(repr(e))
                    return

    def run_ddl(self):
        conn = self.server.connect(db="dc")

        def one(cur):
            cur.execute(self.rng.choice(DDL))
            self.ddl_done += 1
        self._statements(conn, one)

    def produce(self):
        conn = self.server.connect(db="dc")

        def one(cur):
            mid = self.next_id
            self.next_id += 1
            self.attempted.add(mid)
            cur.execute("INSERT INTO q (id, body) VALUES (%s, %s)", (mid, payload(mid)))
            self.acked.add(mid)
        self._statements(conn, one)


def rows_in(server):
    with server.connect(db="dc").cursor() as cur:
        cur.execute("SHOW TABLES")
        tables = sorted(r[0] for r in cur.fetchall())
        assert "q" in tables and "q_moved" not in tables, f"tables after restart: {tables}"
        cur.execute("SELECT id, body FROM q")
        return cur.fetchall()


def test_kill9_during_ddl_keeps_every_acknowledged_row(fresh_server):
    server = fresh_server
    server.sql("SET GLOBAL queue_sync_mode = 'fdatasync'")
    server.sql("CREATE DATABASE dc")
    server.sql("CREATE TABLE dc.q (id INT NOT NULL, body VARCHAR(100)) ENGINE=QUEUE")
    rng = random.Random(SEED)
    expected, attempted, next_id = set(), set(), 1
    for cycle in range(CYCLES):
        load = Load(server, rng, next_id)
        load.start()
        wait_until(lambda: load.ddl_done >= 3 or load.errors, timeout=60, what="three DDL statements")
        threading.Event().wait(rng.uniform(0.0, 0.25))
        load.killed.set()
        server.kill9()
        load.join()
        assert not load.errors, f"cycle {cycle} (seed {SEED}): {load.errors[:3]}"
        server.start()
        log = server.err_log_since_start()
        assert "[ERROR]" not in log, f"cycle {cycle} (seed {SEED}):\n{log[-3000:]}"

        expected |= load.acked
        attempted |= load.attempted
        next_id = load.next_id
        rows = rows_in(server)
        ids = [r[0] for r in rows]
        assert len(ids) == len(set(ids)), f"cycle {cycle}: duplicated ids after restart"
        missing = expected - set(ids)
        assert not missing, f"cycle {cycle}: {len(missing)} acknowledged rows lost, e.g. {sorted(missing)[:5]}"
        invented = set(ids) - attempted
        assert not invented, f"cycle {cycle}: rows nobody inserted: {sorted(invented)[:5]}"
        bad = [r for r in rows if r[1] != payload(r[0])]
        assert not bad, f"cycle {cycle}: payload changed: {bad[:3]}"
        expected = set(ids)  # an in-flight INSERT that made it is now a row like the others
    assert len(expected) > 0
