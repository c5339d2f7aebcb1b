"""The README's worker example: queue ten jobs, handle them on 4 threads, exactly once.
Run against `./q4m.sh run`'s server: python3 clients/python/examples/quickstart.py
(Q4M_SOCKET=... for another server)."""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # not needed once pip-installed

import pymysql
from q4m_worker import Worker, enqueue_many, exactly_once


def connect():
    return pymysql.connect(unix_socket=os.environ.get("Q4M_SOCKET", "var/mysqld.sock"),
                           user="root", database="test", autocommit=True)


conn = connect()
with conn.cursor() as cur:
    cur.execute("CREATE TABLE IF NOT EXISTS jobs (id INT, body TEXT) ENGINE=QUEUE MAX_DELIVERIES=5")
    cur.execute("CREATE TABLE IF NOT EXISTS receipts (job_id INT, body TEXT) ENGINE=InnoDB")
enqueue_many(conn, "jobs", [{"id": i, "body": f"order {i}"} for i in range(10)])


@exactly_once  # the receipt and the job's queue_end() commit together
def handle(job):
    job.conn.execute("INSERT INTO receipts VALUES (%s, %s)", (job.row["id"], job.row["body"]))
    if job.row["id"] == 9:
        worker.request_stop()  # a real worker runs until SIGTERM


worker = Worker(connect=connect, table="jobs", handler=handle, threads=4)
worker.run()
with conn.cursor() as cur:
    cur.execute("SELECT COUNT(*) FROM receipts")
    print("receipts:", cur.fetchone()[0], "metrics:", worker.metrics())
