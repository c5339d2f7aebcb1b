#!/usr/bin/python3
"""Measures the limits (issue 30) on a throwaway server from this worktree's build:
  rate    achieved hand-outs per second vs GROUP_RATE (per key) and MAX_RATE (per table), over
          --seconds (default 10) with --consumers connections (default 16);
  idle    the server's CPU time while --consumers connections wait on keys at their limit.
A measurement, not a test: it prints figures (tests/integration/test_limits.py holds the
pass/fail ceilings). Usage: scripts/measure-limits.py [--seconds 10] [--consumers 16]"""
import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
from q4m_server import Server, scratch  # noqa: E402


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(server, table, consumers, seconds):
    """Consumers take and end rows for `seconds`; returns (keys -> hand-outs, elapsed)."""
    counts, lock = {}, threading.Lock()
    start = time.monotonic()
    stop = start + seconds

    def consume():
        c = server.connect()
        cur = c.cursor()
        while time.monotonic() < stop:
            cur.execute(f"SELECT k FROM {table} WHERE queue_wait('{table}', 0.2)")
            rows = cur.fetchall()
            if rows and time.monotonic() < stop:
                with lock:
                    counts[rows[0][0]] = counts.get(rows[0][0], 0) + 1
        cur.execute("SELECT queue_end()")
        cur.fetchall()

    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts, time.monotonic() - start


def wait_quietly(c, table, timeout):
    try:
        c.cursor().execute(f"SELECT queue_wait('{table}', {timeout})")
    except Exception:  # noqa: BLE001 - the server is stopped under it at the end
        pass


def fill(server, table, keys, rows_per_key):
    for k in range(keys):
        server.sql(f"INSERT INTO test.{table} (k) VALUES " + ", ".join([f"('key{k}')"] * rows_per_key))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--consumers", type=int, default=16)
    args = ap.parse_args()
    root, pristine, plugin_dir = scratch("q4m-limits-")
    server = Server(root / "s", pristine, plugin_dir=plugin_dir, binlog=False).start()
    try:
        server.install_plugin()
        print(f"{args.consumers} consumers, {args.seconds:.0f} s per figure")
        for rate, burst, keys in ((20, 1, 4), (100, 10, 2), (500, 50, 1)):
            server.sql(f"CREATE TABLE test.g (k VARCHAR(10)) ENGINE=QUEUE "
                       f"MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=0 GROUP_RATE='{rate}' GROUP_BURST={burst}")
            fill(server, "g", keys, int(rate * args.seconds * 1.5) + burst + 100)
            counts, elapsed = drain(server, "g", args.consumers, args.seconds)
            for key in sorted(counts):
                got = counts[key]
                print(f"GROUP_RATE={rate}/s burst {burst} {key}: {got} in {elapsed:.2f} s = {got / elapsed:.1f}/s "
                      f"({100 * got / elapsed / rate:.1f} % of the limit; ceiling {burst + rate * elapsed:.0f})")
            server.sql("DROP TABLE test.g")
        for rate, burst in ((50, 1), (1000, 20)):
            server.sql(f"CREATE TABLE test.t (k VARCHAR(10)) ENGINE=QUEUE "
                       f"MAX_RATE='{rate}' MAX_BURST={burst}")
            fill(server, "t", 1, int(rate * args.seconds * 1.5) + burst + 100)
            counts, elapsed = drain(server, "t", args.consumers, args.seconds)
            got = sum(counts.values())
            print(f"MAX_RATE={rate}/s burst {burst}: {got} in {elapsed:.2f} s = {got / elapsed:.1f}/s "
                  f"({100 * got / elapsed / rate:.1f} % of the limit; ceiling {burst + rate * elapsed:.0f})")
            server.sql("DROP TABLE test.t")
        # idle: consumers wait on a key at its concurrency and on a table at MAX_IN_FLIGHT
        server.sql("CREATE TABLE test.c (k VARCHAR(10)) ENGINE=QUEUE "
                   "MESSAGE_GROUP_COLUMN='k' GROUP_CONCURRENCY=1")
        server.sql("CREATE TABLE test.f (k VARCHAR(10)) ENGINE=QUEUE MAX_IN_FLIGHT=1")
        fill(server, "c", 1, 100)
        fill(server, "f", 1, 100)
        owners = [server.connect(), server.connect()]
        for o, t in zip(owners, ("c", "f")):
            o.cursor().execute(f"SELECT queue_wait('{t}', 0)")
        waiters = []
        for i in range(args.consumers):
            c = server.connect()
            th = threading.Thread(target=wait_quietly, args=(c, "cf"[i % 2], args.seconds + 30), daemon=True)
            th.start()
            waiters.append(th)
        time.sleep(2)
        pid = server.proc.pid
        before, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(args.seconds)
        used, wall = cpu_seconds(pid) - before, time.monotonic() - t0
        print(f"idle: {args.consumers} consumers waiting on limited rows: server CPU {used:.3f} s in {wall:.1f} s")
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
