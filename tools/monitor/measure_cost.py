#!/usr/bin/python3
"""What q4m-monitor costs the queue: q4m-bench multireader (QUEUE only) with and without the
monitor polling every 5 s, a Prometheus-like scrape of /metrics every 5 s and an open
dashboard (the overview and a queue's page fetched every 5 s, as their refresh does),
alternated on one throwaway server. Prints each run and the medians (docs/monitoring.md, "Cost").

  tools/monitor/measure_cost.py [--rounds 5] [--messages 400000] [--concurrency 16] [--sync none,durable]
"""
import argparse
import html.parser
import http.cookiejar
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "build" / "bin" / "q4m-bench"
MONITOR = REPO / "tools" / "monitor" / "q4m-monitor"


def tool(name):
    return shutil.which(name) or f"/usr/sbin/{name}"


def start_server(tmp: Path) -> subprocess.Popen:
    subprocess.run([tool("mariadb-install-db"), "--no-defaults", f"--datadir={tmp}/data",
                    "--auth-root-authentication-method=normal", "--skip-test-db"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    args = [tool("mariadbd"), "--no-defaults", f"--datadir={tmp}/data", f"--socket={tmp}/mysqld.sock",
            "--skip-networking", f"--plugin-dir={REPO}/build/plugin", f"--log-error={tmp}/error.log",
            "--innodb-buffer-pool-size=256M", "--max-connections=300", "--skip-log-bin"]
    if subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() == "0":
        args.append("--user=root")
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = [tool("mariadb"), "--no-defaults", "-S", f"{tmp}/mysqld.sock", "-uroot"]
    for _ in range(300):
        if subprocess.run(client + ["-e", "SELECT 1"], capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    subprocess.run(client + ["-e", "INSTALL SONAME 'ha_queue'; CREATE DATABASE IF NOT EXISTS test"], check=True)
    return proc


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.csrf = [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href", "").startswith("/queue/"):
            self.links.append(a["href"])
        if tag == "input" and a.get("name") == "csrf":
            self.csrf = a.get("value")


class Watchers:
    """The monitor process, a scraper of /metrics and a dashboard viewer, every `every` seconds."""

    def __init__(self, sock: str, port: int, every: float = 5.0):
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(["/usr/bin/python3", str(MONITOR), "--socket", sock, "--listen",
                                      f"127.0.0.1:{port}", "--interval", str(every)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                urllib.request.urlopen(self.url + "/metrics", timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        self.stop_flag = threading.Event()
        self.scrapes = self.pages = 0
        self.started = time.monotonic()
        self.cpu_ms_per_s = 0.0  # the monitor process's CPU time per second of the run, at stop()
        self.threads = [threading.Thread(target=self._scrape, args=(every,), daemon=True),
                        threading.Thread(target=self._dashboard, args=(every,), daemon=True)]
        for t in self.threads:
            t.start()

    def _scrape(self, every):
        while not self.stop_flag.wait(every):
            urllib.request.urlopen(self.url + "/metrics", timeout=10).read()
            self.scrapes += 1

    def _dashboard(self, every):
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        p = Links()
        p.feed(opener.open(self.url + "/login", timeout=10).read().decode())
        opener.open(self.url + "/login", data=urllib.parse.urlencode(
            {"user": "root", "password": "", "csrf": p.csrf}).encode(), timeout=10).read()
        while not self.stop_flag.wait(every):
            p = Links()
            p.feed(opener.open(self.url + "/", timeout=30).read().decode())
            for link in p.links[:1]:  # the bench's table, as an open queue page
                opener.open(self.url + link, timeout=30).read()
            self.pages += 1 + len(p.links[:1])

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=30)
        self.cpu_ms_per_s = 1000 * cpu_seconds(self.proc.pid) / (time.monotonic() - self.started)
        self.proc.terminate()
        self.proc.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def idle_cost(server: subprocess.Popen, sock: str, port: int, seconds: float):
    """CPU the server and the monitor spend per second on the monitoring alone (no queue traffic;
    10 queue tables), with and without the watchers: CPU time, which the machine's load does not skew."""
    client = [tool("mariadb"), "--no-defaults", "-S", sock, "-uroot", "test", "-e"]
    for i in range(10):
        subprocess.run(client + [f"CREATE TABLE IF NOT EXISTS idle{i} (v INT, body TEXT) ENGINE=QUEUE MAX_DELIVERIES=3; "
                                 f"INSERT INTO idle{i} SELECT seq, 'x' FROM seq_1_to_1000"], check=True)
    for monitored in (False, True):
        w = Watchers(sock, port) if monitored else None
        before, t = cpu_seconds(server.pid), time.monotonic()
        time.sleep(seconds)
        server_ms = 1000 * (cpu_seconds(server.pid) - before) / (time.monotonic() - t)
        extra = ""
        if w:
            w.stop()
            extra = f"; the monitor itself {w.cpu_ms_per_s:.1f} ms/s ({w.scrapes} scrapes, {w.pages} pages)"
        print(f"idle, monitor={'on ' if monitored else 'off'}: mariadbd {server_ms:.1f} ms of CPU per second{extra}",
              flush=True)


def bench(sock: str, sync: str, messages: int, concurrency: int) -> float:
    out = subprocess.run([str(BENCH), "--socket", sock, "--user", "root", "--engines", "queue",
                          "--scenarios", "multireader", "--concurrency", str(concurrency), "--sync", sync,
                          "--messages", str(messages), "--json"], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out[out.index("{"):])
    runs = [r for r in doc["runs"] if r.get("scenario") == "multireader" and r.get("engine") == "queue"]
    return runs[0]["rate"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--messages", type=int, default=400000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--sync", default="none,durable")
    ap.add_argument("--port", type=int, default=9198)
    ap.add_argument("--idle", type=float, default=0,
                    help="instead: CPU per second of mariadbd and the monitor over this many seconds, without load")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="q4m-monitor-cost-"))
    server = start_server(tmp)
    sock = str(tmp / "mysqld.sock")
    results = {}  # (sync, monitored) -> [msg/s]
    try:
        if a.idle:
            idle_cost(server, sock, a.port, a.idle)
            return
        for rnd in range(a.rounds):
            for sync in a.sync.split(","):
                order = (False, True) if rnd % 2 == 0 else (True, False)  # alternate which goes first
                for monitored in order:
                    w = Watchers(sock, a.port) if monitored else None
                    try:
                        rate = bench(sock, sync, a.messages, a.concurrency)
                    finally:
                        extra = ""
                        if w:
                            w.stop()
                            extra = (f" ({w.scrapes} scrapes, {w.pages} pages; the monitor used "
                                     f"{w.cpu_ms_per_s:.1f} ms of CPU per second)")
                    results.setdefault((sync, monitored), []).append(rate)
                    print(f"round {rnd + 1} sync={sync} monitor={'on ' if monitored else 'off'}: "
                          f"{rate:,.0f} msg/s{extra}", flush=True)
        print()
        for sync in a.sync.split(","):
            off = statistics.median(results[(sync, False)])
            on = statistics.median(results[(sync, True)])
            print(f"sync={sync}: median off {off:,.0f} msg/s, on {on:,.0f} msg/s: {100 * (on - off) / off:+.1f} %")
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
