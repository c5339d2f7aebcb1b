#!/usr/bin/python3
"""INSERT latency while queue_compact() runs, per (queue_use_concurrent_compaction, queue_sync_mode).

For each configuration: a fresh QUEUE table is filled to --file-mib with --row-bytes rows
(sync none, multi-row INSERTs), all but --live-percent of the rows are DELETEd (REMOVE
records: the file does not shrink), then one connection INSERTs small rows back to back,
recording each INSERT's latency, while a second connection runs queue_compact().
Reported: latency of the INSERTs that overlapped the compaction (and of those that ran in the
second before it, as the baseline), and how long the compaction took.

By default it starts a throwaway mariadbd with the plugin from build/plugin (the integration
test harness, tests/integration/q4m_server.py) under --workdir and removes it afterwards.
Not a test: timings depend on the machine.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from q4m_server import Server, make_pristine_datadir  # noqa: E402

WARMUP_S = 0.5
BASELINE_S = 1.0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))] if xs else float("nan")


def fill(s, rows, row_bytes, batch):
    c = s.connect()
    cur = c.cursor()
    pad = "x" * row_bytes
    t0 = time.monotonic()
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        cur.execute("INSERT INTO lat.q (v, pad) VALUES " + ",".join(["(%s,%s)"] * n),
                    [a for i in range(start, start + n) for a in (i, pad)])
    return time.monotonic() - t0


def measure(s, concurrent, sync, args):
    s.sql("DROP DATABASE IF EXISTS lat")
    s.sql("CREATE DATABASE lat")
    s.sql("CREATE TABLE lat.q (v BIGINT NOT NULL, pad LONGBLOB) ENGINE=QUEUE")
    s.sql("SET GLOBAL queue_compact_min_bytes = 18446744073709551615")  # only our explicit compaction
    s.sql("SET GLOBAL queue_sync_mode = 'none'")
    rows = (args.file_mib << 20) // (args.row_bytes + 40)
    fill_s = fill(s, rows, args.row_bytes, args.batch)
    keep_every = max(1, round(100 / args.live_percent))
    t0 = time.monotonic()
    s.sql(f"DELETE FROM lat.q WHERE v % {keep_every} <> 0")
    delete_s = time.monotonic() - t0
    file_bytes = s.value("SELECT FILE_BYTES FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")
    live = s.value("SELECT COUNT(*) FROM lat.q")
    os.sync()  # the fill's dirty pages must not be charged to the first fdatasync'd INSERTs
    s.sql(f"SET GLOBAL queue_sync_mode = '{sync}'")
    s.sql(f"SET GLOBAL queue_use_concurrent_compaction = {'ON' if concurrent else 'OFF'}")

    samples = []  # (start, latency)
    stop = threading.Event()

    def writer():
        c = s.connect()
        cur = c.cursor()
        i = 10**12
        while not stop.is_set():
            t = time.perf_counter()
            cur.execute("INSERT INTO lat.q (v, pad) VALUES (%s, 'small row written during compaction')", (i,))
            samples.append((t, time.perf_counter() - t))
            i += 1

    w = threading.Thread(target=writer)
    w.start()
    time.sleep(WARMUP_S + BASELINE_S)
    cc = s.connect()
    c_start = time.perf_counter()
    with cc.cursor() as cur:
        cur.execute("SELECT queue_compact('lat.q')")
        assert cur.fetchone()[0] == 1
    c_end = time.perf_counter()
    time.sleep(0.2)
    stop.set()
    w.join()
    after = s.value("SELECT FILE_BYTES FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")
    # An INSERT counts as "during" if any part of it overlapped the compaction.
    during = [lat for t, lat in samples if t <= c_end and t + lat >= c_start]
    base = [lat for t, lat in samples if c_start - BASELINE_S <= t and t + lat < c_start]
    ms = lambda x: round(x * 1000, 3)  # noqa: E731
    res = {
        "concurrent": concurrent, "sync": sync,
        "fill_s": round(fill_s, 1), "delete_s": round(delete_s, 1),
        "file_mib_before": round(file_bytes / 2**20), "file_mib_after": round(after / 2**20),
        "live_rows": live, "compaction_s": round(c_end - c_start, 3),
        "inserts_during": len(during),
        "during_p50_ms": ms(pct(during, 50)), "during_p99_ms": ms(pct(during, 99)),
        "during_max_ms": ms(max(during)) if during else None,
        "baseline_p50_ms": ms(pct(base, 50)), "baseline_p99_ms": ms(pct(base, 99)),
        "baseline_max_ms": ms(max(base)) if base else None,
    }
    s.sql("DROP DATABASE lat")
    return res


def machine():
    model = ""
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    return f"{model}, {os.cpu_count()} CPUs, {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file-mib", type=int, default=1024, help="data file size before compaction")
    ap.add_argument("--live-percent", type=float, default=10, help="share of rows left live")
    ap.add_argument("--row-bytes", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=500, help="rows per fill INSERT")
    ap.add_argument("--sync", default="none,fdatasync")
    ap.add_argument("--concurrent", default="on,off")
    ap.add_argument("--workdir", default=None, help="where the throwaway server lives (default: /tmp)")
    ap.add_argument("--json", action="store_true", help="one JSON object per configuration")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="q4m-complat-", dir=args.workdir))
    try:
        make_pristine_datadir(root / "pristine")
        s = Server(root / "s", root / "pristine", binlog=False).start()
        s.install_plugin()
        print(f"# {machine()}; file {args.file_mib} MiB, {args.live_percent}% live, rows {args.row_bytes} B")
        hdr = ("concurrent sync       compaction_s file_MiB live_rows  n   base_p50 base_p99 base_max"
               "  p50_ms  p99_ms  max_ms")
        if not args.json:
            print(hdr)
        for sync in args.sync.split(","):
            for conc in args.concurrent.split(","):
                r = measure(s, conc == "on", sync, args)
                if args.json:
                    print(json.dumps(r), flush=True)
                else:
                    print(f"{'ON' if r['concurrent'] else 'OFF':10} {sync:10} {r['compaction_s']:12} "
                          f"{r['file_mib_before']:>4}->{r['file_mib_after']:<4} {r['live_rows']:9} "
                          f"{r['inserts_during']:5} {r['baseline_p50_ms']:8} {r['baseline_p99_ms']:8} "
                          f"{r['baseline_max_ms']:8} {r['during_p50_ms']:7} {r['during_p99_ms']:7} "
                          f"{r['during_max_ms']:7}   (fill {r['fill_s']}s, delete {r['delete_s']}s)",
                          flush=True)
        s.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
