#!/usr/bin/env python3
"""Benchmark (not a test): one table with 3 subscriptions against 3 tables fed by one
transaction (the workaround), on a throwaway server with the binary log on and durable syncs.

Each run inserts N rows (multi-row INSERTs of 100; the workaround: the same INSERT into each
of the 3 tables, in one transaction), then C consumer connections spread over the 3
subscriptions (or tables) take and end rows one by one until each got N. It reports the
deliveries per second of the drain, and the data file bytes and the server's resident memory
(VmRSS growth over the inserts) per row after the inserts.
Runs alternate (subscriptions, tables, subscriptions, ...). Every delivery is checked:
each row exactly once per subscription/table.

    /usr/bin/python3 tools/bench/subscriptions_vs_tables.py [--rows 6000] [--consumers 6] [--runs 2]
"""
import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))
from q4m_server import Server, make_pristine_datadir, snapshot_plugin  # noqa: E402

NAMES = ["billing", "email", "analytics"]


def fill(server, mode, rows):
    c = server.connect()
    cur = c.cursor()
    for start in range(0, rows, 100):
        values = ", ".join(f"({i}, 'payload-{i:08d}')" for i in range(start + 1, min(rows, start + 100) + 1))
        if mode == "subs":
            cur.execute(f"INSERT INTO test.events VALUES {values}")
        else:
            cur.execute("BEGIN")
            for n in NAMES:
                cur.execute(f"INSERT INTO test.t_{n} VALUES {values}")
            cur.execute("COMMIT")


def drain(server, mode, rows, consumers):
    got = {n: [] for n in NAMES}
    lock = threading.Lock()

    def run(name):
        c = server.connect()
        cur = c.cursor()
        source, table = (f"test.events@{name}", "test.events") if mode == "subs" else (f"test.t_{name}", f"test.t_{name}")
        while True:
            with lock:
                if len(got[name]) >= rows:
                    break
            cur.execute(f"SELECT id FROM {table} WHERE queue_wait('{source}', 1)")
            r = cur.fetchall()
            if r:
                with lock:
                    got[name].append(r[0][0])
        cur.execute("SELECT queue_end()")

    threads = [threading.Thread(target=run, args=(NAMES[i % 3],)) for i in range(consumers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    for n in NAMES:
        assert sorted(got[n]) == list(range(1, rows + 1)), f"{mode} {n}: not each row exactly once"
    return 3 * rows / elapsed


def file_bytes(server, mode):
    files = ["events.Q4M"] if mode == "subs" else [f"t_{n}.Q4M" for n in NAMES]
    return sum(os.path.getsize(server.datadir / "test" / f) for f in files)


def rss_bytes(server):
    for line in open(f"/proc/{server.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=6000)
    ap.add_argument("--consumers", type=int, default=6)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="q4m-subs-bench-"))
    make_pristine_datadir(root / "pristine")
    server = Server(root / "s", root / "pristine", ["--plugin-load-add=ha_queue.so"], snapshot_plugin(root / "plugin"))
    server.start()
    try:
        for run in range(a.runs):
            for mode in ("subs", "tables"):
                for t in ["events"] + [f"t_{n}" for n in NAMES]:
                    server.sql(f"DROP TABLE IF EXISTS test.{t}")
                if mode == "subs":
                    server.sql("CREATE TABLE test.events (id INT, body VARCHAR(40)) ENGINE=QUEUE")
                    for n in NAMES:
                        server.sql(f"SELECT queue_subscribe('test.events', '{n}')")
                else:
                    for n in NAMES:
                        server.sql(f"CREATE TABLE test.t_{n} (id INT, body VARCHAR(40)) ENGINE=QUEUE")
                rss0 = rss_bytes(server)
                t0 = time.monotonic()
                fill(server, mode, a.rows)
                fill_s = time.monotonic() - t0
                rss = rss_bytes(server) - rss0
                size = file_bytes(server, mode)
                rate = drain(server, mode, a.rows, a.consumers)
                print(f"run {run} {mode:6}: insert {a.rows / fill_s:8.0f} rows/s, file {size / a.rows:6.1f} B/row, RSS {rss / a.rows:6.1f} B/row, "
                      f"drain {rate:8.0f} deliveries/s ({a.consumers} consumers)", flush=True)
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
