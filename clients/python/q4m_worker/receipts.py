"""Receipts (docs/sql-api.md, "Receipts"): take rows on one connection, end them on any other.
For connection pools, proxies and request handlers that cannot keep one connection for the
life of a job (owner mode, which Worker uses, is cheaper where they can).

    rows = receive(conn, "jobs", lease=30, max_rows=10, timeout=1)
    for r in rows:                   # r.row: the columns as a dict; r.receipt: its receipt
        ...
    end_receipts(other_conn, "jobs", [r.receipt for r in rows])   # in other_conn's transaction

A stale receipt (its lease ran out, an earlier delivery, a server restart) raises
pymysql.MySQLError 1205 (errors.is_lease_lost) and the call changes nothing.
"""
from collections import namedtuple

import pymysql

from .sql import quote_table

Received = namedtuple("Received", "row receipt")


def _receipt_list(receipts):
    if isinstance(receipts, str):
        receipts = [receipts]
    receipts = list(receipts)
    if not receipts:
        raise ValueError("q4m: no receipt given")
    return ",".join(receipts)


def receive(conn, table, lease, max_rows=1, timeout=0, condition=None):
    """Takes up to max_rows rows of `table` ('t' or 'db.t'; `condition` as queue_wait's
    't:expr'), each held under a receipt with its own lease (seconds) and by no connection:
    waits up to `timeout` seconds for the first. Returns [Received(row dict, receipt)]."""
    arg = table + (":" + condition if condition else "")
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT *, queue_receipt() AS `q4m_receipt` FROM {quote_table(table)} "
                    "WHERE queue_receive(%s, %s, %s, %s)", (arg, lease, max_rows, timeout))
        rows = cur.fetchall()
    out = []
    for r in rows:
        receipt = r.pop("q4m_receipt")
        out.append(Received(r, receipt))
    return out


def _call(conn, function, table, receipts, *extra):
    args = (table, _receipt_list(receipts)) + extra
    marks = ", ".join(["%s"] * len(args))
    with conn.cursor() as cur:
        cur.execute(f"SELECT {function}({marks})", args)
        return cur.fetchone()[0]


def end_receipts(conn, table, receipts):
    """Removes the receipts' rows (all or none); inside conn's open transaction at its COMMIT,
    with its InnoDB rows. Returns how many."""
    return _call(conn, "queue_end_receipt", table, receipts)


def abort_receipts(conn, table, receipts, delay=0):
    """Gives the receipts' rows back to the queue, handed out again after `delay` seconds."""
    return _call(conn, "queue_abort_receipt", table, receipts, delay)


def renew_receipts(conn, table, receipts, lease):
    """Their leases now run out `lease` seconds from now."""
    return _call(conn, "queue_renew_receipt", table, receipts, lease)
