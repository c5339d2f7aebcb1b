"""kill -9 in the middle of ALTER TABLE, RENAME TABLE, TRUNCATE, CREATE and DROP of queue
tables and DROP DATABASE.

MariaDB's DDL log replays or undoes an interrupted DDL statement at the next start, and it calls
the engine's rename and drop again for steps that may already have happened. After every restart:
the error log has no [ERROR] (the server logs a failed replay there), the table is there under
one of its two names, no `#sql` file is left behind, every row whose INSERT returned OK is there
exactly once with its payload, and nothing else is. Q4M_DDL_CRASH_CYCLES sets the number of kills
(default 30), Q4M_DDL_CRASH_SEED the statement sequence."""
import os
import random
import threading

import pymysql
import pytest

from sqlcheck import wait_until

CYCLES = int(os.environ.get("Q4M_DDL_CRASH_CYCLES", "30"))
SEED = int(os.environ.get("Q4M_DDL_CRASH_SEED", "4242"))
NAMES = ("q", "q_moved")  # ALTER TABLE ... RENAME moves the table between these
DDL = [  # {t}: the table's current name, {other}: the other one
    "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS extra INT",
    "ALTER TABLE {t} DROP COLUMN IF EXISTS extra",
    "ALTER TABLE {t} ENGINE=QUEUE",                  # a full copy into #sql-alter and back
    "ALTER TABLE {t} ENGINE=InnoDB",                 # engine change: the other recovery path
    "ALTER TABLE {t} ENGINE=QUEUE",
    "ALTER TABLE {t} COMMENT='rebuilt'",
    "ALTER TABLE {t} RENAME TO {other}",             # copy and rename in one statement
    "ALTER TABLE {t} RENAME TO {other}, ADD COLUMN IF NOT EXISTS extra INT",
    "RENAME TABLE {t} TO tmp_x, tmp_x TO {t}",       # two renames, one DDL log entry
    "CREATE TABLE IF NOT EXISTS spare (id INT) ENGINE=QUEUE",
    "INSERT INTO spare VALUES (1)",
    "TRUNCATE TABLE spare",
    "DROP TABLE IF EXISTS spare",
    "CREATE TABLE IF NOT EXISTS spare2 ENGINE=QUEUE SELECT id, body FROM {t}",
    "DROP TABLE IF EXISTS spare2",
    "CREATE DATABASE IF NOT EXISTS dc2",
    "CREATE TABLE IF NOT EXISTS dc2.a (id INT) ENGINE=QUEUE",
    "RENAME TABLE spare TO dc2.spare",                # across databases
    "DROP DATABASE IF EXISTS dc2",                    # the DDL log's drop-database action
]
DDL += DDL[:3]  # copying ALTERs twice as often: their renames are where recovery has most to redo
TOLERATED = {1049, 1050, 1146, 1213, 1205}  # no dc2 or spare yet, dc2.spare there, deadlock, lock wait


def payload(mid):
    return f"m{mid:07d}-" + "x" * (mid % 50)


class Load:
    """One connection runs DDL back to back, another inserts; both stop at the kill."""

    def __init__(self, server, rng, name, next_id):
        self.server, self.rng = server, rng
        self.name = name  # where the table is now (the DDL thread moves it)
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

    def _statements(self, conn, one):
        with conn.cursor() as cur:
            while not self.killed.is_set():
                try:
                    one(cur)
                # After the kill the harness closes this connection under the thread, and
                # pymysql then fails with AttributeError/OSError instead of an SQL error.
                except (pymysql.MySQLError, AttributeError, OSError) as e:
                    if self.killed.is_set():
                        return  # the kill cut the statement short: expected
                    if isinstance(e, pymysql.MySQLError) and e.args and e.args[0] in TOLERATED:
                        continue
                    self.errors.append(repr(e))
                    return

    def run_ddl(self):
        def one(cur):
            other = NAMES[1 - NAMES.index(self.name)]
            statement = self.rng.choice(DDL).format(t=self.name, other=other)
            cur.execute(statement)
            if "RENAME TO" in statement:
                self.name = other
            self.ddl_done += 1
        self._statements(self.server.connect(db="dc"), one)

    def produce(self):
        def one(cur):
            mid = self.next_id
            self.next_id += 1
            self.attempted.add(mid)
            cur.execute(f"INSERT INTO {self.name} (id, body) VALUES (%s, %s)", (mid, payload(mid)))
            self.acked.add(mid)
        self._statements(self.server.connect(db="dc"), one)


def table_after_restart(server, cycle):
    """The one name the table has after recovery; fails on both, neither, or leftovers."""
    with server.connect(db="dc").cursor() as cur:
        cur.execute("SHOW TABLES")
        tables = {r[0] for r in cur.fetchall()}
    present = [n for n in NAMES if n in tables]
    assert len(present) == 1 and "tmp_x" not in tables, f"cycle {cycle}: tables after restart: {tables}"
    leftovers = [f for db in ("dc", "dc2") if (server.datadir / db).is_dir()
                 for f in os.listdir(server.datadir / db) if f.startswith("#sql")]
    assert not leftovers, f"cycle {cycle}: files left by the interrupted DDL: {leftovers}"
    return present[0]


@pytest.fixture(params=["binlog off", "binlog on"])
def ddl_server(request, server_factory):
    """With the binary log on, DDL recovery first asks the binlog which statements completed."""
    args = ["--log-bin=ddl-bin", "--server-id=1"] if request.param == "binlog on" else ["--skip-log-bin"]
    s = server_factory.new(extra_args=args)
    yield s
    s.destroy(keep_dir=bool(os.environ.get("Q4M_KEEP_TMP")))


def test_kill9_during_ddl_keeps_every_acknowledged_row(ddl_server):
    server = ddl_server
    server.sql("SET GLOBAL queue_sync_mode = 'fdatasync'")
    server.sql("CREATE DATABASE dc")
    server.sql("CREATE TABLE dc.q (id INT NOT NULL, body VARCHAR(100)) ENGINE=QUEUE")
    rng = random.Random(SEED)
    name, expected, attempted, next_id = "q", set(), set(), 1
    for cycle in range(CYCLES):
        load = Load(server, rng, name, next_id)
        load.start()
        wait_until(lambda: load.ddl_done >= 3 or load.errors, timeout=60, what="three DDL statements")
        threading.Event().wait(rng.uniform(0.0, 0.25))
        load.killed.set()
        server.kill9()
        load.join()
        assert not load.errors, f"cycle {cycle} (seed {SEED}): {load.errors[:3]}"
        server.start()
        log = server.err_log_since_start()
        # A binary log event the kill cut mid-write is the server's to report when it reads the
        # log (its recovery, QUEUE's ordering of commits): not an error of the replay.
        errors = [l for l in log.splitlines() if "[ERROR]" in l
                  and "Error in Log_event::read_log_event(): 'Event truncated'" not in l]
        assert not errors, f"cycle {cycle} (seed {SEED}):\n{log[-3000:]}"

        name = table_after_restart(server, cycle)
        expected |= load.acked
        attempted |= load.attempted
        next_id = load.next_id
        with server.connect(db="dc").cursor() as cur:
            cur.execute(f"SELECT id, body FROM {name}")
            rows = cur.fetchall()
        ids = [r[0] for r in rows]
        assert len(ids) == len(set(ids)), f"cycle {cycle}: duplicated ids after restart"
        missing = expected - set(ids)
        assert not missing, f"cycle {cycle}: {len(missing)} acknowledged rows lost, e.g. {sorted(missing)[:5]}"
        invented = set(ids) - attempted
        assert not invented, f"cycle {cycle}: rows nobody inserted: {sorted(invented)[:5]}"
        bad = [r for r in rows if r[1] != payload(r[0])]
        assert not bad, f"cycle {cycle}: payload changed: {bad[:3]}"
        expected = set(ids)  # an in-flight INSERT that made it is now a row like the others
    assert expected, "no INSERT succeeded in any cycle"
