#!/usr/bin/python3
"""Measures MESSAGE_TTL's expiry with the binary log off and on, on a throwaway server from
this worktree's build: --rows rows (default 200,000) past their TTL at once (an ALTER TABLE
sets the TTL under them), and the time until the table holds none. With the binary log on
the engine's own session removes them, 10,000 a transaction, each logged as the removal of
its rows by id (docs/replication.md); off, the table removes them itself.
A measurement, not a test: it prints figures. Usage: scripts/measure-expiry.py [--rows N]"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
from q4m_server import Server, scratch  # noqa: E402


def measure(root, pristine, plugin_dir, binlog, rows):
    args = ["--plugin-load-add=ha_queue.so"]
    if binlog:
        args += ["--log-bin=bin", "--server-id=1", "--binlog-format=ROW"]
    server = Server(root / ("on" if binlog else "off"), pristine, extra_args=args, plugin_dir=plugin_dir, binlog=binlog).start()
    try:
        server.sql("CREATE TABLE test.q (id INT NOT NULL, body VARCHAR(64)) ENGINE=QUEUE")
        batch = 1000
        for start in range(0, rows, batch):
            values = ", ".join(f"({i}, 'payload-{i:08d}')" for i in range(start, min(rows, start + batch)))
            server.sql(f"INSERT INTO test.q VALUES {values}")
        time.sleep(1.2)  # every row is past a TTL of 1 s
        t0 = time.monotonic()
        server.sql("ALTER TABLE test.q MESSAGE_TTL=1")
        altered = time.monotonic() - t0
        while server.queue_stats("test.q")["rows"]:
            time.sleep(0.01)
        elapsed = time.monotonic() - t0
        removals = 0
        if binlog:
            for log in server.sql("SHOW BINARY LOGS"):
                removals += sum(1 for e in server.sql(f"SHOW BINLOG EVENTS IN '{log[0]}'")
                                if "queue_apply_removal" in e[5])
        return altered, elapsed, removals
    finally:
        server.destroy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200000)
    args = ap.parse_args()
    root, pristine, plugin_dir = scratch("q4m-expiry-")
    for binlog in (False, True):
        altered, elapsed, removals = measure(root, pristine, plugin_dir, binlog, args.rows)
        print(f"binary log {'on ' if binlog else 'off'}: {args.rows} rows expired in {elapsed:.2f} s "
              f"({args.rows / elapsed:,.0f} rows/s; the ALTER returned after {altered:.2f} s"
              + (f"; {removals} removal statements in the binary log)" if binlog else ")"))


if __name__ == "__main__":
    main()
