"""A primary and a replica of it, real MariaDB replication over 127.0.0.1 (GTID), for the
replication tests."""
import socket
import time

import pymysql

SYNC_TIMEOUT_S = 60


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Pair:
    """A primary (binary log on, listening on a 127.0.0.1 port) and a replica of it."""

    def __init__(self, server_factory, replica_at_startup=True, replica_args=(), primary_args=()):
        self.port = _free_port()
        self.primary = server_factory.new(extra_args=[
            "--skip-networking=0", "--bind-address=127.0.0.1", f"--port={self.port}",
            "--server-id=1", "--log-bin=primary-bin", "--binlog-format=MIXED", *primary_args])
        self.replica = None
        try:
            # The replica applies each logged statement inside a transaction (with its
            # mysql.gtid_slave_pos row): QUEUE must be loaded at its startup (docs/transactions.md).
            self.replica = server_factory.new(extra_args=["--server-id=2", "--relay-log=replica-relay",
                                                          *replica_args], at_startup=replica_at_startup)
            self.primary.sql("CREATE USER repl@'127.0.0.1' IDENTIFIED BY 'repl'")
            self.primary.sql("GRANT REPLICATION SLAVE ON *.* TO repl@'127.0.0.1'")
            self.replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={self.port}, "
                             "MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1")
            self.replica.sql("START SLAVE")
            self.sync()
        except BaseException:
            self.destroy()
            raise

    def status(self):
        c = self.replica.admin()
        with c.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SHOW SLAVE STATUS")
            return cur.fetchone()

    def wait_stopped(self):
        """Waits until the replica's SQL thread stopped; its status then."""
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        while time.monotonic() < deadline:
            st = self.status()
            if st["Slave_SQL_Running"] == "No":
                return st
            time.sleep(0.05)
        raise AssertionError(f"replica kept running: {self.status()}")

    def sync(self):
        """Waits until the replica has applied everything the primary logged so far, as long as
        it makes progress: it fails once its applier stopped, or applied nothing for
        SYNC_TIMEOUT_S. A fixed deadline failed a replica that was only slow: with --sync-binlog=1
        (Q4M_EXTRA_SERVER_ARGS) a one-thread applier syncs its binary log once per transaction
        while the primary's producers share their syncs, and a load test's ~12,000
        transactions took it more than a minute."""
        pos = self.primary.value("SELECT @@gtid_binlog_pos")
        applied = self.replica.value("SELECT @@gtid_slave_pos")
        last_progress = time.monotonic()
        while self.replica.value("SELECT MASTER_GTID_WAIT(%s, %s)", (pos, 5)) != 0:
            now_applied = self.replica.value("SELECT @@gtid_slave_pos")
            if now_applied != applied:
                applied, last_progress = now_applied, time.monotonic()
            st = self.status()
            assert st["Slave_SQL_Running"] == "Yes" and time.monotonic() - last_progress < SYNC_TIMEOUT_S, \
                f"replica did not reach {pos}: {st}"

    def destroy(self):
        for s in (self.replica, self.primary):
            if s is not None:
                s.destroy()


class Chain:
    """primary -> middle (log-bin, log_slave_updates) -> last: a Pair whose replica logs again
    what it applies, and a last replica of that middle one."""

    def __init__(self, server_factory):
        middle_port = _free_port()
        self.pair = Pair(server_factory, replica_args=(
            "--skip-networking=0", "--bind-address=127.0.0.1", f"--port={middle_port}",
            "--log-bin=middle-bin", "--log-slave-updates", "--binlog-format=ROW"))
        self.last = None
        try:
            self.last = server_factory.new(extra_args=["--server-id=3", "--relay-log=last-relay"], at_startup=True)
            self.last.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={middle_port}, "
                          "MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos, "
                          "MASTER_CONNECT_RETRY=1")
            self.last.sql("START SLAVE")
        except BaseException:
            self.destroy()
            raise

    def sync(self):
        """Waits until the middle and then the last replica applied all the primary logged."""
        self.pair.sync()
        pos = self.pair.replica.value("SELECT @@gtid_binlog_pos")
        assert self.last.value("SELECT MASTER_GTID_WAIT(%s, %s)", (pos, SYNC_TIMEOUT_S)) == 0, \
            self.last.sql("SHOW SLAVE STATUS")

    def destroy(self):
        if self.last is not None:
            self.last.destroy()
        self.pair.destroy()
