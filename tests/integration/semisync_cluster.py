"""A primary and replicas of it on 127.0.0.1 ports (GTID, semi-sync AFTER_SYNC), every server
configured alike so that any can be promoted; and the failover runbook of docs/replication.md
as code (promote, repoint, rejoin)."""
import time

import pymysql

from replication_pair import SYNC_TIMEOUT_S, _free_port


def _args(server_id, port, primary):
    return ["--skip-networking=0", "--bind-address=127.0.0.1", f"--port={port}", f"--server-id={server_id}",
            "--log-bin=bin", "--log-slave-updates", "--binlog-format=ROW", "--relay-log=relay",
            "--gtid-strict-mode=ON", "--sync-binlog=1",
            # A replica waits for no acknowledgement (its applier would wait for its own replicas):
            # the primary's side of semi-sync is switched on at promotion.
            f"--rpl-semi-sync-master-enabled={'ON' if primary else 'OFF'}", "--rpl-semi-sync-slave-enabled=ON",
            "--rpl-semi-sync-master-wait-point=AFTER_SYNC", "--rpl-semi-sync-master-timeout=120000"]


def status(server):
    with server.admin().cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute("SHOW SLAVE STATUS")
        return cur.fetchone()


def replicate_from(replica, port, use_gtid="slave_pos"):
    replica.sql("STOP SLAVE")
    replica.sql(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, MASTER_USER='repl', "
                f"MASTER_PASSWORD='repl', MASTER_USE_GTID={use_gtid}, MASTER_CONNECT_RETRY=1")
    replica.sql("SET GLOBAL read_only = ON")
    replica.sql("START SLAVE")


def wait_applied(replica, gtid):
    got = replica.value("SELECT MASTER_GTID_WAIT(%s, %s)", (gtid, SYNC_TIMEOUT_S))
    assert got == 0, f"replica did not reach {gtid}: {status(replica)}"


def seq_no(gtid_pos):
    """The sequence number of domain 0 in a GTID position ('0-1-42' -> 42; '' -> 0)."""
    for g in filter(None, (gtid_pos or "").split(",")):
        domain, _, seq = g.strip().split("-")
        if domain == "0":
            return int(seq)
    return 0


class Cluster:
    def __init__(self, server_factory, replicas=2):
        self.ports = [_free_port() for _ in range(replicas + 1)]
        self.servers = []
        try:
            for i, port in enumerate(self.ports):
                self.servers.append(server_factory.new(extra_args=_args(i + 1, port, i == 0), at_startup=True))
            primary = self.servers[0]
            for s in self.servers:  # each server's own (unlogged): a semi-sync primary would wait
                c = s.connect()     # for a replica's acknowledgement of it before any is connected
                c.cursor().execute("SET SESSION sql_log_bin = 0")
                c.cursor().execute("CREATE USER repl@'127.0.0.1' IDENTIFIED BY 'repl'")
                c.cursor().execute("GRANT REPLICATION SLAVE ON *.* TO repl@'127.0.0.1'")
            for r in self.servers[1:]:
                replicate_from(r, self.ports[0])
            deadline = time.monotonic() + SYNC_TIMEOUT_S
            while int(dict(primary.sql("SHOW STATUS LIKE 'Rpl_semi_sync_master_clients'"))
                      ["Rpl_semi_sync_master_clients"]) < replicas:
                assert time.monotonic() < deadline, "replicas did not connect as semi-sync replicas"
                time.sleep(0.05)
        except BaseException:
            self.destroy()
            raise

    def port_of(self, server):
        return self.ports[self.servers.index(server)]

    def promote_most_advanced(self, replicas):
        """The runbook's steps 1-3: let every replica apply what it received, promote the one
        that received the most, point the others at it. Returns the new primary."""
        for r in replicas:  # 1. apply everything received (the relay log) before comparing
            wait_applied(r, status(r)["Gtid_IO_Pos"])
        winner = max(replicas, key=lambda r: seq_no(r.value("SELECT @@gtid_slave_pos")))
        winner.sql("STOP SLAVE")  # 2. promote
        winner.sql("RESET SLAVE ALL")
        winner.sql("SET GLOBAL rpl_semi_sync_master_enabled = ON")
        winner.sql("SET GLOBAL read_only = OFF")
        for r in replicas:  # 3. the others follow it, from their GTID position
            if r is not winner:
                replicate_from(r, self.port_of(winner))
        return winner

    def rejoin(self, old_primary, new_primary):
        """The runbook's step 5: the old primary restarts as a replica (--init-rpl-role=SLAVE:
        its crash recovery cuts from its binary log, and rolls back in the engines, what no
        replica acknowledged) and follows the new one from where its binary log ends."""
        old_primary.start(extra_args=["--init-rpl-role=SLAVE", "--read-only", "--rpl-semi-sync-master-enabled=OFF"])
        old_primary.sql("SET GLOBAL gtid_slave_pos = @@gtid_binlog_pos")
        replicate_from(old_primary, self.port_of(new_primary))

    def destroy(self):
        for s in self.servers:
            s.destroy()
