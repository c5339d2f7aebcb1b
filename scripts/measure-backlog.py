#!/usr/bin/python3
"""Manual measurement (not CI) of a deep backlog (issue 43): the server's RSS growth per queued
row, SELECT COUNT(*), a condition that matches only the last row (first and a later call),
consuming from the front, and the reopen after a clean shutdown and after kill -9, each with
its RSS. One build per run (--plugin-dir), a throwaway mariadbd (the integration-test harness),
sync none, binary log off unless --binlog; prints one JSON line and deletes everything.

  /usr/bin/python3 scripts/measure-backlog.py --rows 1000000 --plugin-dir build/plugin
  /usr/bin/python3 scripts/measure-backlog.py --rows 1000000 --plugin-dir /work/main/build/plugin
"""
import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from q4m_server import Server, make_pristine_datadir  # noqa: E402

BATCH = 100_000


def rss(s):
    for line in open(f"/proc/{s.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def timed(fn):
    t = time.monotonic()
    r = fn()
    return r, time.monotonic() - t


def run(root, args):
    make_pristine_datadir(root / "pristine")
    s = Server(root / "s", root / "pristine", plugin_dir=Path(args.plugin_dir).resolve(), binlog=args.binlog).start()
    s.install_plugin()
    s.sql("SET GLOBAL queue_sync_mode = 'none'")
    s.sql("SET GLOBAL queue_compact_min_bytes = 18446744073709551615")
    s.sql("CREATE TABLE test.q (v BIGINT NOT NULL, pad VARBINARY(64) NOT NULL) ENGINE=QUEUE")
    s.sql("INSERT INTO test.q VALUES (0, 'warm')")
    c = s.connect()
    assert s.value("SELECT queue_wait('test.q', 0)", conn=c) == 1
    assert s.value("SELECT queue_end()", conn=c) == 1
    out = {"plugin_dir": args.plugin_dir, "rows": args.rows, "binlog": args.binlog}
    before = rss(s)
    t = time.monotonic()
    for start in range(1, args.rows + 1, BATCH):
        end = min(args.rows, start + BATCH - 1)
        s.sql(f"INSERT INTO test.q SELECT seq, REPEAT('x', 60) FROM seq_{start}_to_{end}")
    out["insert_s"] = round(time.monotonic() - t, 1)
    time.sleep(1)
    out["rss_before_mb"] = round(before / 2**20, 1)
    out["rss_after_insert_mb"] = round(rss(s) / 2**20, 1)
    out["rss_growth_bytes_per_row"] = round((rss(s) - before) / args.rows, 2)
    out["file_bytes"] = s.value("SELECT FILE_BYTES FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")
    n, out["count_s"] = timed(lambda: s.value("SELECT COUNT(*) FROM test.q"))
    assert n == args.rows, n

    def take_where(v):
        assert s.value(f"SELECT queue_wait('test.q:v={v}', 0)", conn=c) == 1
        assert s.value("SELECT v FROM test.q", conn=c) == v
        assert s.value("SELECT queue_abort()", conn=c) == 1
    _, out["cond_last_first_s"] = timed(lambda: take_where(args.rows))
    _, out["cond_last_later_s"] = timed(lambda: take_where(args.rows))
    out["rss_after_scan_bytes_per_row"] = round((rss(s) - before) / args.rows, 2)

    def consume(k):
        for i in range(k):
            assert s.value("SELECT queue_wait('test.q', 0)", conn=c) == 1
        assert s.value("SELECT queue_end()", conn=c) == 1
    _, t = timed(lambda: consume(args.consume))
    out["consume_front_rows_per_s"] = round(args.consume / t)
    for kill in (False, True):
        name = "kill9" if kill else "clean"
        if kill:
            s.kill9()
        else:
            s.stop()
        t = time.monotonic()
        s.start()
        s.install_plugin()
        n = s.value("SELECT COUNT(*) FROM test.q")
        out[f"reopen_{name}_s"] = round(time.monotonic() - t, 2)
        out[f"rss_after_reopen_{name}_mb"] = round(rss(s) / 2**20, 1)
        assert n == args.rows - args.consume, n
        c = s.connect()
    s.stop()
    print(json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--consume", type=int, default=20_000)
    ap.add_argument("--plugin-dir", default=str(REPO / "build" / "plugin"))
    ap.add_argument("--binlog", action="store_true")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="q4m-backlog-", dir=args.workdir))
    try:
        run(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
