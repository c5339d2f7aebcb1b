"""Command line and environment: where MariaDB is, which account samples, where to listen."""
import argparse
import os
from dataclasses import dataclass

DEFAULT_LISTEN = "127.0.0.1:9199"


@dataclass
class Config:
    listen_host: str
    listen_port: int
    socket: str | None        # MariaDB unix socket, or
    host: str                 # host and port
    port: int
    user: str                 # the sampling account (SELECT on the queues it reports, PROCESS)
    password: str
    interval: float           # seconds between polls
    history: float            # seconds of samples kept for the plots
    per_table: bool           # per-table metric labels (off for hundreds of tables: totals only)
    session_timeout: float    # seconds a dashboard login lasts without use


def parse(argv=None) -> Config:
    p = argparse.ArgumentParser(prog="q4m-monitor", description=__doc__)
    p.add_argument("--listen", default=os.environ.get("Q4M_MONITOR_LISTEN", DEFAULT_LISTEN),
                   help=f"HOST:PORT to serve /metrics and the dashboard on (default {DEFAULT_LISTEN})")
    p.add_argument("--socket", default=os.environ.get("Q4M_MONITOR_SOCKET"),
                   help="MariaDB unix socket (else --host/--port)")
    p.add_argument("--host", default=os.environ.get("Q4M_MONITOR_DB_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("Q4M_MONITOR_DB_PORT", "3306")))
    p.add_argument("--user", default=os.environ.get("Q4M_MONITOR_USER", "root"),
                   help="account the sampler polls with (default root)")
    p.add_argument("--password-file", default=os.environ.get("Q4M_MONITOR_PASSWORD_FILE"),
                   help="file holding that account's password (or env Q4M_MONITOR_PASSWORD)")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between polls (default 5)")
    p.add_argument("--history", type=float, default=3600.0, help="seconds of samples kept (default 3600)")
    p.add_argument("--no-per-table-metrics", dest="per_table", action="store_false",
                   help="metrics summed over all tables, without schema/table labels")
    p.add_argument("--session-timeout", type=float, default=3600.0)
    a = p.parse_args(argv)
    host, _, port = a.listen.rpartition(":")
    if not host or not port.isdigit():
        p.error(f"--listen {a.listen!r}: expected HOST:PORT")
    password = os.environ.get("Q4M_MONITOR_PASSWORD", "")
    if a.password_file:
        with open(a.password_file, encoding="utf-8") as f:
            password = f.read().strip()
    if a.interval <= 0 or a.history < a.interval:
        p.error("--interval must be > 0 and --history at least one interval")
    return Config(host.strip("[]"), int(port), a.socket, a.host, a.port, a.user, password, a.interval,
                  a.history, a.per_table, a.session_timeout)
