"""A q4m_worker Worker in a process of its own, for test_python_worker.py (SIGTERM, kill -9).

Each job writes (job id, delivery count, pid) into the InnoDB ledger: through job.conn
inside the job's transaction with --transactional, else through a connection of its own.
--processes N runs N worker processes; with --barrier N each one's first job waits until N
processes have taken one. The job whose id is --block-id, once its ledger row is written,
creates --marker and waits while --block-file exists (at most 120 s). On exit prints
whether every handler finished in time and the worker's metrics, as JSON.
"""
import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

import pymysql  # noqa: E402

from q4m_worker import Worker  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--transactional", action="store_true")
    ap.add_argument("--block-id", type=int, default=-1)
    ap.add_argument("--block-file", default="")
    ap.add_argument("--marker", default="")
    ap.add_argument("--stop-deadline", type=float, default=30.0)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--barrier", type=int, default=0)
    a = ap.parse_args()

    def connect():
        return pymysql.connect(unix_socket=a.socket, user="root", password="", database="test",
                               autocommit=True, connect_timeout=10, read_timeout=180)

    local = threading.local()

    def write_ledger(job):
        sql = f"INSERT INTO {a.ledger} (job_id, delivery, who) VALUES (%s, %s, %s)"
        args = (job.row["id"], job.delivery_count, str(os.getpid()))
        if job.conn is not None:
            job.conn.execute(sql, args)
        else:
            if getattr(local, "conn", None) is None:
                local.conn = connect()
            with local.conn.cursor() as cur:
                cur.execute(sql, args)

    arrived = []

    def barrier():
        # The process's first job waits until --barrier processes have each taken one (table
        # `arrivals`), so that the test knows every process took part.
        arrived.append(1)
        c = connect()
        try:
            with c.cursor() as cur:
                cur.execute("INSERT INTO arrivals VALUES (%s)", (str(os.getpid()),))
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    cur.execute("SELECT COUNT(DISTINCT pid) FROM arrivals")
                    if cur.fetchone()[0] >= a.barrier:
                        return
                    time.sleep(0.02)
        finally:
            c.close()

    def handler(job):
        if a.barrier and not arrived:
            barrier()
        write_ledger(job)
        if a.sleep:
            time.sleep(a.sleep)
        if job.row["id"] == a.block_id:
            Path(a.marker).write_text(str(os.getpid()))
            deadline = time.monotonic() + 120
            while os.path.exists(a.block_file) and time.monotonic() < deadline:
                time.sleep(0.02)

    w = Worker(connect=connect, table=a.table, handler=handler, threads=a.threads,
               transactional=a.transactional, wait_timeout=0.5, stop_deadline=a.stop_deadline,
               processes=a.processes)
    in_time = w.run()
    print(json.dumps({"in_time": in_time, "metrics": w.metrics()}), flush=True)


if __name__ == "__main__":
    main()
