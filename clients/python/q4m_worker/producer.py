"""Producing: enqueue() and enqueue_many() into a QUEUE table.

A row is a dict of column values. `delay`, `group` and `dedup_key` go into the columns the
table names in its VISIBLE_AT_COLUMN, MESSAGE_GROUP_COLUMN and DEDUP_COLUMN options (read from
information_schema once per table), or into columns the caller names.

The library never commits a connection it was given: on a connection with autocommit off, or
inside the caller's BEGIN, the rows are queued when the caller commits (docs/transactions.md,
the transactional outbox).
"""
import datetime
import re
import threading

from .errors import ConfigError
from .sql import quote_table, split_table

_OPTION_RE = re.compile(r"`?(VISIBLE_AT_COLUMN|MESSAGE_GROUP_COLUMN|DEDUP_COLUMN|MAX_DELIVERIES)`?"
                        r"\s*=\s*(?:'((?:[^'\\]|\\.|'')*)'|(\d+))", re.IGNORECASE)


class TableOptions:
    """What the worker and the producer need of a table's q4m options."""

    def __init__(self, visible_at_column=None, group_column=None, dedup_column=None,
                 max_deliveries=0):
        self.visible_at_column = visible_at_column
        self.group_column = group_column
        self.dedup_column = dedup_column
        self.max_deliveries = max_deliveries

    def __repr__(self):
        return (f"TableOptions(visible_at_column={self.visible_at_column!r}, group_column="
                f"{self.group_column!r}, dedup_column={self.dedup_column!r}, "
                f"max_deliveries={self.max_deliveries})")


def parse_create_options(text):
    """information_schema.TABLES.CREATE_OPTIONS (or SHOW CREATE TABLE's tail) -> TableOptions."""
    found = {}
    for m in _OPTION_RE.finditer(text or ""):
        name = m.group(1).upper()
        if m.group(2) is not None:
            found[name] = m.group(2).replace("''", "'").replace("\\'", "'").replace("\\\\", "\\")
        else:
            found[name] = m.group(3)
    return TableOptions(visible_at_column=found.get("VISIBLE_AT_COLUMN") or None,
                        group_column=found.get("MESSAGE_GROUP_COLUMN") or None,
                        dedup_column=found.get("DEDUP_COLUMN") or None,
                        max_deliveries=int(found.get("MAX_DELIVERIES") or 0))


_cache = {}
_cache_lock = threading.Lock()


def table_options(conn, table, refresh=False):
    """The table's options, read from information_schema (cached per server and table;
    refresh=True reads them again, e.g. after an ALTER TABLE)."""
    db, name = split_table(table)
    key = (getattr(conn, "host_info", None), getattr(conn, "db", None), db, name)
    with _cache_lock:
        if not refresh and key in _cache:
            return _cache[key]
    with conn.cursor() as cur:
        cur.execute("SELECT ENGINE, CREATE_OPTIONS FROM information_schema.TABLES "
                    "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s", (db, name))
        rows = cur.fetchall()
    if not rows:
        raise ConfigError(f"q4m: table {table!r} does not exist (or this account cannot see it)")
    engine, options = rows[0][0], rows[0][1]
    if str(engine).upper() != "QUEUE":
        raise ConfigError(f"q4m: table {table!r} is not a QUEUE table (ENGINE={engine})")
    opts = parse_create_options(options)
    with _cache_lock:
        _cache[key] = opts
    return opts


def forget_table_options():
    """Drops every cached TableOptions (after ALTER TABLE changed a table's options)."""
    with _cache_lock:
        _cache.clear()


def _delay_seconds(delay):
    if isinstance(delay, datetime.timedelta):
        delay = delay.total_seconds()
    try:
        delay = float(delay)
    except (TypeError, ValueError):
        raise ValueError(f"q4m: delay must be a number of seconds or a timedelta, not {delay!r}")
    if delay < 0 or delay != delay:
        raise ValueError(f"q4m: delay must be >= 0 seconds, not {delay!r}")
    return delay


def _column_for(kind, option, given, table, opts_value):
    column = given or opts_value
    if not column:
        raise ConfigError(f"q4m: table {table!r} has no {option} option, so {kind}= cannot be "
                          f"given (CREATE/ALTER TABLE ... {option}='col', or name the column "
                          f"with {kind}_column=)")
    return column


def _build_insert(conn, table, rows, delay, group, dedup_key, visible_at_column, group_column,
                  dedup_column):
    """One multi-row INSERT for rows (dicts with the same keys), plus its arguments."""
    if not rows:
        raise ValueError("q4m: no rows to enqueue")
    extras = {}  # column -> ("value", v) | ("delay", seconds)
    need_opts = ((delay is not None and not visible_at_column) or
                 (group is not None and not group_column) or
                 (dedup_key is not None and not dedup_column))
    opts = table_options(conn, table) if need_opts else TableOptions()
    if delay is not None:
        col = _column_for("delay", "VISIBLE_AT_COLUMN", visible_at_column, table,
                          opts.visible_at_column)
        extras[col] = ("delay", _delay_seconds(delay))
    if group is not None:
        col = _column_for("group", "MESSAGE_GROUP_COLUMN", group_column, table, opts.group_column)
        extras[col] = ("value", group)
    if dedup_key is not None:
        col = _column_for("dedup_key", "DEDUP_COLUMN", dedup_column, table, opts.dedup_column)
        extras[col] = ("value", dedup_key)
    columns = list(rows[0].keys())
    for r in rows:
        if list(r.keys()) != columns and set(r.keys()) != set(columns):
            raise ValueError("q4m: every row of one enqueue_many() must have the same columns "
                             f"({sorted(columns)} vs {sorted(r.keys())})")
    for col in extras:
        if col in columns:
            raise ValueError(f"q4m: column {col!r} is given in the row and by a keyword "
                             "(delay=/group=/dedup_key=); give it once")
    all_cols = columns + list(extras)
    if not all_cols:
        raise ValueError("q4m: a row needs at least one column")
    placeholders = []
    for col in columns:
        placeholders.append("%s")
    for col, (kind, value) in extras.items():
        # The server's clock decides the delay: producers' clocks may differ from it.
        placeholders.append("NOW(6) + INTERVAL %s MICROSECOND" if kind == "delay" else "%s")
    tuple_sql = "(" + ", ".join(placeholders) + ")"
    args = []
    for r in rows:
        args.extend(r[c] for c in columns)
        for col, (kind, value) in extras.items():
            args.append(int(round(value * 1_000_000)) if kind == "delay" else value)
    col_sql = ", ".join("`" + c.replace("`", "``") + "`" for c in all_cols)
    sql = (f"INSERT INTO {quote_table(table)} ({col_sql}) VALUES "
           + ", ".join([tuple_sql] * len(rows)))
    return sql, args


def _on_connection(conn_or_pool, work):
    """Returns work(conn) on the caller's connection (never committed here) or on a connection
    taken from a pool / factory (committed, then given back)."""
    if hasattr(conn_or_pool, "cursor"):
        return work(conn_or_pool)
    own = conn_or_pool.connection() if hasattr(conn_or_pool, "connection") else conn_or_pool()
    try:
        n = work(own)
        own.commit()
        return n
    finally:
        own.close()


def enqueue(conn_or_pool, table, row, delay=None, group=None, dedup_key=None,
            visible_at_column=None, group_column=None, dedup_column=None):
    """Queues one row (a dict of column values) into `table`.

    delay: seconds (or a timedelta) before the row is handed out (VISIBLE_AT_COLUMN);
    group: its message group (MESSAGE_GROUP_COLUMN); dedup_key: its deduplication key
    (DEDUP_COLUMN). Each needs the table option, or the column named by the matching
    *_column argument. Returns the affected-rows count (a duplicate dropped by DEDUP_COLUMN
    still counts, as the server reports it).

    conn_or_pool: a PyMySQL connection (used as it is: inside the caller's transaction the row
    is queued at the caller's COMMIT; nothing is committed here), or a pool with .connection()
    or a function returning a new connection (committed and closed here)."""
    return enqueue_many(conn_or_pool, table, [row], delay=delay, group=group, dedup_key=dedup_key,
                        visible_at_column=visible_at_column, group_column=group_column,
                        dedup_column=dedup_column)


def enqueue_many(conn_or_pool, table, rows, delay=None, group=None, dedup_key=None,
                 visible_at_column=None, group_column=None, dedup_column=None):
    """Queues rows (dicts with the same columns) in one multi-row INSERT: all or none, one
    sync. delay/group/dedup_key apply to every row; for a key per row put it in the row under
    the column's name."""
    rows = list(rows)

    def insert(conn):
        sql, args = _build_insert(conn, table, rows, delay, group, dedup_key, visible_at_column,
                                  group_column, dedup_column)
        with conn.cursor() as cur:
            return cur.execute(sql, args)
    return _on_connection(conn_or_pool, insert)
