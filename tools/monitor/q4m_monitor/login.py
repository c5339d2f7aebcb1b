"""Checking a dashboard login: it must prove the password of the account it names, never be
let in for who the monitor process is.

Over a unix socket the server's unix_socket plugin authenticates the *client process*: it
accepts a login when the OS user of the connecting process has the name the login gives,
whatever the password (Debian's `root@localhost` is `IDENTIFIED VIA mysql_native_password
... OR unix_socket`). The monitor connects for the person at the browser, so when the name
typed is the monitor's own OS user name and the account may authenticate by unix_socket, a
connection that succeeds proves nothing. Then the monitor checks the password again through a
connection made by a helper process running as another OS user (`nobody`), for which
unix_socket cannot match and only the password counts. When it cannot (the monitor does not
run as root, or `nobody` cannot reach the socket), the login is refused with a message that
says why."""
import os
import pwd
import re
import socket
import subprocess
import sys

import pymysql

from . import db
from .config import Config

# Server plugins that let a client in for who its process is (its OS user), not for a password.
PROCESS_IDENTITY_PLUGINS = {"unix_socket", "auth_socket"}
HELPER_USER = "nobody"
HELPER_TIMEOUT_S = 10

# Connects to the socket as the user it runs as and hands the connected socket to its parent.
HELPER = """
import socket, sys
path, out = sys.argv[1], socket.socket(fileno=int(sys.argv[2]))
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(float(sys.argv[3]))
    s.connect(path)
except OSError as e:
    out.sendall(("error: " + str(e)).encode())
    sys.exit(1)
socket.send_fds(out, [b"ok"], [s.fileno()])
"""


class LoginRefused(Exception):
    """A login refused by the monitor itself (not by the server), with the reason to show."""


def check(cfg: Config, user: str, password: str):
    """Returns if `password` is that of the account `user` names; raises pymysql.MySQLError
    (the server refused it) or LoginRefused."""
    conn = db.connect(cfg, user, password)
    try:
        if not (cfg.socket and user == monitor_os_user() and may_use_process_identity(conn)):
            return
    finally:
        conn.close()
    prove_as_other_os_user(cfg, user, password)


def monitor_os_user() -> str | None:
    """The OS user name the server's unix_socket plugin sees for this process's connections."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return None


def may_use_process_identity(conn) -> bool:
    """Whether the logged-in account lists a plugin that ignores the password (True if the
    account's definition cannot be read: then the password is checked again anyway)."""
    try:
        definition = db.rows(conn, "SHOW CREATE USER CURRENT_USER()")[0][0]
    except pymysql.MySQLError:
        return True
    return bool(plugins(definition) & PROCESS_IDENTITY_PLUGINS)


def plugins(create_user: str) -> set[str]:
    """The authentication plugins a SHOW CREATE USER statement names (VIA x [USING '...'] OR y)."""
    unquoted = re.sub(r"'(?:[^'\\]|\\.|'')*'", "''", create_user)
    return {p.lower() for p in re.findall(r"\b(?:VIA|OR)\s+`?([A-Za-z0-9_]+)", unquoted)}


def prove_as_other_os_user(cfg: Config, user: str, password: str):
    why = (f"the account {user!r} may also log in by unix_socket, as the OS user this monitor runs as, "
           f"so a connection from the monitor does not prove the password")
    if os.geteuid() != 0:
        raise LoginRefused(f"{why}; the monitor cannot check it another way (it does not run as root): "
                           f"log in with another account, or run the monitor as another OS user")
    try:
        sock = connect_as(HELPER_USER, cfg.socket)
    except (OSError, KeyError, subprocess.SubprocessError) as e:  # KeyError: no such OS user
        raise LoginRefused(f"{why}; checking it through a connection as OS user {HELPER_USER!r} failed: {e}") from e
    conn = pymysql.connect(defer_connect=True, unix_socket=cfg.socket, **db.connect_args(user, password))
    try:
        conn.connect(sock)
    finally:
        conn.close() if conn.open else sock.close()


def connect_as(os_user: str, path: str) -> socket.socket:
    """A unix socket connected to `path` by a helper process running as `os_user`: the
    server's SO_PEERCRED is the helper's, not this process's."""
    entry = pwd.getpwnam(os_user)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", HELPER, path, str(theirs.fileno()),
                               str(db.CONNECT_TIMEOUT_S)],
                              pass_fds=[theirs.fileno()], user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=HELPER_TIMEOUT_S, cwd="/")
        theirs.close()
        ours.settimeout(HELPER_TIMEOUT_S)
        msg, fds, _, _ = socket.recv_fds(ours, 1024, 1)
    finally:
        theirs.close()
        ours.close()
    if msg != b"ok" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        detail = msg.decode(errors="replace") or proc.stderr.decode(errors="replace").strip()
        raise OSError(detail or f"the helper exited with {proc.returncode}")
    sock = socket.socket(fileno=fds[0])
    sock.settimeout(None)
    return sock
