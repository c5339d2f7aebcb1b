#!/usr/bin/python3
"""Manual check (not CI) of a QUEUE table larger than 4 GiB: fill it (sync none, multi-row
INSERTs of 64 KiB rows), kill -9 + restart, COUNT(*), consume rows stored beyond the 4 GiB
offset (byte-exact, via SHA2), delete most rows, compact, kill -9 + restart and a clean restart,
check again. Prints the timing of each step. Runs a throwaway mariadbd (integration-test
harness) under --workdir and deletes everything afterwards.

  /usr/bin/python3 scripts/check-large-table.py [--gib 4.5] [--workdir /var/tmp]
"""
import argparse
import hashlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from q4m_server import Server, make_pristine_datadir  # noqa: E402

ROW = 64 << 10
BATCH = 64  # rows per INSERT: 4 MiB statements, under the default max_allowed_packet
BLOCK = (hashlib.sha256(b"block").hexdigest() * (ROW // 64))[:ROW]


def body(v):
    return f"{v:020d}" + BLOCK[20:]


def sha(v):
    return hashlib.sha256(body(v).encode()).hexdigest()


class Steps:
    def __init__(self):
        self.t = time.monotonic()

    def done(self, what):
        now = time.monotonic()
        print(f"{now - self.t:8.1f} s  {what}", flush=True)
        self.t = now


def check_rows(s, vs):
    """SHA2 of the stored rows with these v equal what was inserted."""
    got = dict(s.sql("SELECT v, SHA2(pad, 256) FROM test.q WHERE v IN (" + ",".join(map(str, vs)) + ")"))
    bad = [v for v in vs if got.get(v) != sha(v)]
    assert not bad, f"rows differ or are missing: {bad[:10]}"


def file_bytes(s):
    return s.value("SELECT FILE_BYTES FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='q'")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=4.5)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="q4m-large-", dir=args.workdir))
    try:
        run(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        print(f"removed {root}")


def run(root, args):
    make_pristine_datadir(root / "pristine")
    s = Server(root / "s", root / "pristine", binlog=False).start()
    s.install_plugin()
    s.sql("SET GLOBAL queue_sync_mode = 'none'")
    s.sql("SET GLOBAL queue_compact_min_bytes = 18446744073709551615")  # only the explicit compaction
    s.sql("CREATE TABLE test.q (v BIGINT NOT NULL, pad LONGBLOB) ENGINE=QUEUE")
    n = int(args.gib * (1 << 30)) // ROW
    step = Steps()
    c = s.connect()
    with c.cursor() as cur:
        for start in range(0, n, BATCH):
            k = min(BATCH, n - start)
            cur.execute("INSERT INTO q VALUES " + ",".join(["(%s,%s)"] * k),
                        [a for v in range(start, start + k) for a in (v, body(v))])
    size = file_bytes(s)
    step.done(f"filled {n} rows of {ROW} B: file {size} bytes ({size / 2**30:.2f} GiB)")
    assert size > (4 << 30)

    s.restart(kill=True)
    step.done("kill -9 + restart")
    assert s.value("SELECT COUNT(*) FROM test.q") == n
    step.done(f"first COUNT(*) after the crash (recovery walks the file) = {n}")
    assert file_bytes(s) == size

    # Rows whose payload lies past 4 GiB: v with v * (ROW + overheads) > 4 GiB; take the last 1%.
    beyond = n - max(50, n // 100)
    check_rows(s, list(range(beyond, n, 7)))
    step.done("SHA2 of rows beyond 4 GiB match")
    cc = s.connect()
    with cc.cursor() as cur:
        for _ in range(100):
            cur.execute(f"SELECT queue_wait('test.q:v >= {beyond}', 0)")
            assert cur.fetchone()[0] == 1
            cur.execute("SELECT v, SHA2(pad, 256) FROM q")
            v, h = cur.fetchone()
            assert v >= beyond and h == sha(v), (v, h)
        cur.execute("SELECT queue_end()")
    consumed = set(range(beyond, beyond + 100))
    step.done(f"consumed 100 rows from v={beyond} (offset > 4 GiB) with queue_wait, byte-exact")

    s.sql(f"DELETE FROM test.q WHERE v % 10 <> 0 AND v < {beyond}")
    live = [v for v in range(n) if (v % 10 == 0 or v >= beyond) and v not in consumed]
    step.done(f"DELETE of 90% of the rows below; {len(live)} live")
    assert s.value("SELECT queue_compact('test.q')") == 1
    after = file_bytes(s)
    step.done(f"queue_compact: {size} -> {after} bytes")
    assert s.value("SELECT COUNT(*) FROM test.q") == len(live)
    check_rows(s, live[::37] + live[-20:])
    s.restart(kill=True)
    assert s.value("SELECT COUNT(*) FROM test.q") == len(live)
    check_rows(s, live[::37] + live[-20:])
    step.done("kill -9 + restart after compaction: COUNT and SHA2 match")
    s.restart()
    assert s.value("SELECT COUNT(*) FROM test.q") == len(live)
    step.done("clean restart (index snapshot): COUNT matches")
    s.stop()


if __name__ == "__main__":
    main()
