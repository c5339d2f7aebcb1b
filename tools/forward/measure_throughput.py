#!/usr/bin/env python3
"""Measures q4m-forward throughput between two throwaway local servers (not a test).

  python3 tools/forward/measure_throughput.py [ROWS] [PAYLOAD_BYTES] [BATCH ...]

For each queue_sync_mode and each --batch (default: 1 and 100) it loads ROWS rows into the
source, relays them all with --idle-exit, and prints the relay's rate (rows accepted /
time from start to the last row).
Needs `make plugin tools`.
"""
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from q4m_server import Server, make_pristine_datadir  # noqa: E402

FORWARD = REPO / "build" / "bin" / "q4m-forward"


def load(server, rows, payload):
    server.sql("CREATE TABLE test.src (seq INT, payload VARBINARY(65000)) ENGINE=QUEUE")
    for lo in range(1, rows + 1, 1000):
        hi = min(rows, lo + 999)
        server.sql("INSERT INTO test.src VALUES "
                   + ", ".join(f"({i}, REPEAT('x', {payload}))" for i in range(lo, hi + 1)))


def measure(root, pristine, mode, rows, payload, batch):
    src = Server(root / f"src-{mode}-{batch}", pristine).start()
    dst = Server(root / f"dst-{mode}-{batch}", pristine).start()
    try:
        for s in (src, dst):
            s.install_plugin()
            s.sql(f"SET GLOBAL queue_sync_mode = '{mode}'")
        load(src, rows, payload)
        dst.sql("CREATE TABLE test.dst (seq INT, payload VARBINARY(65000)) ENGINE=QUEUE")
        started = time.monotonic()
        p = subprocess.run(
            [str(FORWARD), "--src", f"socket={src.socket};user=root;db=test;table=src",
             "--dst", f"socket={dst.socket};user=root;db=test;table=dst", "--source-id", "1",
             "--idle-exit", "0.5", "--wait-timeout", "0.25", "--stats-interval", "0", "--batch", str(batch)],
            capture_output=True, text=True, timeout=3600)
        elapsed = time.monotonic() - started - 0.5  # minus the idle wait at the end
        final = [line for line in p.stderr.splitlines() if "final:" in line]
        got = dst.value("SELECT COUNT(*) FROM test.dst")
        assert p.returncode == 0 and got == rows, (p.returncode, got, p.stderr[-2000:])
        print(f"queue_sync_mode={mode:9s} batch={batch:<4d} rows={rows} payload={payload}B  "
              f"{rows / elapsed:8.0f} rows/s  ({elapsed:.1f} s)")
        print("   ", re.sub(r".*final: ", "", final[-1]) if final else "(no final line)")
    finally:
        src.destroy()
        dst.destroy()


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    payload = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    batches = [int(b) for b in sys.argv[3:]] or [1, 100]
    root = Path(tempfile.mkdtemp(prefix="q4m-fwd-measure-"))
    pristine = root / "pristine"
    make_pristine_datadir(pristine)
    for mode in ("fdatasync", "none"):
        for batch in batches:
            measure(root, pristine, mode, rows, payload, batch)
    subprocess.call(["rm", "-rf", str(root)])


if __name__ == "__main__":
    main()
