"""Command line and environment: where MariaDB is, which account samples, where to listen."""
import argparse
import ipaddress
import os
import socket
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
    allow_remote: bool = False        # --listen may be beyond loopback (every login still counts as @localhost)
    trusted_proxy: str | None = None  # the TLS proxy's address: its X-Forwarded-Proto/-For are believed
    secure_cookies: bool = False      # cookies always Secure (else only for requests that came over TLS)
    login_attempts: int = 5           # failed logins (per client address, per account) before the backoff
    login_backoff: float = 30.0       # seconds refused after those; doubles with each further failure


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
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --listen beyond loopback: every dashboard login still connects to MariaDB from "
                        "this machine and counts as 'user'@'localhost' (docs/monitoring.md); empty passwords "
                        "are then refused")
    p.add_argument("--trusted-proxy", default=os.environ.get("Q4M_MONITOR_TRUSTED_PROXY"),
                   help="address of the TLS proxy in front: its X-Forwarded-Proto and X-Forwarded-For are "
                        "believed (Secure cookies, the client's address for throttling and the audit log)")
    p.add_argument("--secure-cookies", action="store_true",
                   help="always mark the cookies Secure (else only when the request came over TLS)")
    p.add_argument("--login-attempts", type=int, default=5,
                   help="failed logins per client address and per account before they are refused (default 5)")
    p.add_argument("--login-backoff", type=float, default=30.0,
                   help="seconds logins are then refused, doubling with each further failure (default 30)")
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
    if a.login_attempts < 1 or a.login_backoff <= 0:
        p.error("--login-attempts must be at least 1 and --login-backoff > 0")
    host = host.strip("[]")
    if not a.allow_remote and not is_loopback(host):
        p.error(f"--listen {a.listen!r} is reachable beyond this machine: every dashboard login connects to "
                f"MariaDB from here and counts as 'user'@'localhost' whatever the browser's address, so the "
                f"accounts' host restrictions stop applying. Listen on 127.0.0.1 behind a TLS proxy, or pass "
                f"--allow-remote if that is what you want (docs/monitoring.md)")
    return Config(host, int(port), a.socket, a.host, a.port, a.user, password, a.interval,
                  a.history, a.per_table, a.session_timeout, a.allow_remote, a.trusted_proxy, a.secure_cookies,
                  a.login_attempts, a.login_backoff)


def is_loopback(host: str) -> bool:
    """Whether every address `host` stands for is a loopback one (0.0.0.0 and :: are every address)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)
