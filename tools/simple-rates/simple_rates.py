#!/usr/bin/python3
"""Insert and consume rates with a simple client (PyMySQL), 1 and 16 connections.

The numbers issue 2 asks for, before any benchmark tool: each connection is its own
process (no GIL between them) running plain statements one at a time:
  insert:  INSERT INTO q (v, s) VALUES (?, ?)                  -- one row per statement
  consume: SELECT v FROM q WHERE queue_wait('q', 1)            -- the one-statement loop
           (each call removes the previous row), then queue_end()
Rates are total rows/s over all connections, wall time from a shared start barrier to
the last connection finishing. Starts a throwaway mariadbd (the integration test
harness) and removes it afterwards. Not a test: timings depend on the machine.
"""
import argparse
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from q4m_server import Server, make_pristine_datadir  # noqa: E402
import pymysql  # noqa: E402

PAYLOAD = "x" * 100


def connect(sock):
    return pymysql.connect(unix_socket=sock, user="root", database="rates", autocommit=True)


def insert_worker(sock, first, n, barrier, out):
    c = connect(sock)
    cur = c.cursor()
    barrier.wait()
    for v in range(first, first + n):
        cur.execute("INSERT INTO q (v, s) VALUES (%s, %s)", (v, PAYLOAD))
    out.put(time.monotonic())


def consume_worker(sock, n, barrier, out):
    c = connect(sock)
    cur = c.cursor()
    got = []
    barrier.wait()
    while len(got) < n:
        cur.execute("SELECT v FROM q WHERE queue_wait('q', 1)")
        row = cur.fetchone()
        if row is None:
            break  # timeout: the queue is empty
        got.append(row[0])
    cur.execute("SELECT queue_end()")
    out.put((time.monotonic(), got))


def run_phase(target, args_of, conns):
    barrier = mp.Barrier(conns + 1)
    out = mp.Queue()
    procs = [mp.Process(target=target, args=args_of(i) + (barrier, out)) for i in range(conns)]
    for p in procs:
        p.start()
    barrier.wait()
    t0 = time.monotonic()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return t0, results


def measure(s, sync, conns, rows):
    s.sql("DROP TABLE IF EXISTS rates.q")
    s.sql("CREATE TABLE rates.q (v BIGINT NOT NULL, s VARCHAR(200)) ENGINE=QUEUE")
    s.sql(f"SET GLOBAL queue_sync_mode = '{sync}'")
    per = rows // conns
    t0, ends = run_phase(insert_worker, lambda i: (str(s.socket), i * per, per), conns)
    insert_rate = per * conns / (max(ends) - t0)
    # Each consumer stops after `per` rows, so the phase ends when the queue is empty.
    t0, res = run_phase(consume_worker, lambda i: (str(s.socket), per), conns)
    got = sorted(v for _, vs in res for v in vs)
    assert got == list(range(per * conns)), "a row was lost or delivered twice"
    consume_rate = len(got) / (max(t for t, _ in res) - t0)
    return insert_rate, consume_rate


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=16000, help="rows per measurement")
    ap.add_argument("--connections", default="1,16")
    ap.add_argument("--sync", default="none,fdatasync")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="q4m-rates-"))
    try:
        make_pristine_datadir(root / "pristine")
        s = Server(root / "s", root / "pristine", binlog=False).start()
        s.install_plugin()
        s.sql("CREATE DATABASE rates")
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
        print(f"# {cpu}, {os.cpu_count()} CPUs, {platform.release()}; {args.rows} rows of ~110 B per measurement")
        print(f"{'sync':10} {'conns':>5} {'insert rows/s':>14} {'consume rows/s':>15}")
        for sync in args.sync.split(","):
            for conns in (int(c) for c in args.connections.split(",")):
                ins, con = measure(s, sync, conns, args.rows)
                print(f"{sync:10} {conns:5} {ins:14,.0f} {con:15,.0f}", flush=True)
        s.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
