"""Browsing a queue's rows a page at a time, never the whole queue: keyset pages by row id
(queue_scan_rowid() > last id shown, LIMIT n; the server stops the scan there), with an
optional filter over the table's columns.

The filter is an expression over column names, literals, comparisons, AND/OR/NOT, IS [NOT]
NULL, LIKE, IN, BETWEEN and + - * /: nothing else passes, so it can call no function (no
queue_wait(), no SLEEP()). Literals become parameters; column names are checked against the
table and quoted."""
import re
from dataclasses import dataclass

from . import db

PAGE_ROWS = 50
KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "LIKE", "IN", "BETWEEN", "TRUE", "FALSE"}
TOKEN = re.compile(r"""\s*(?:
    (?P<number>\d+(?:\.\d+)?)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<name>`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<op><=|>=|<>|!=|=|<|>|\(|\)|,|\+|-|\*|/)
)""", re.VERBOSE)


class FilterError(ValueError):
    pass


@dataclass
class Filter:
    sql: str      # the WHERE part, with %s for each literal
    args: list


def compile_filter(text: str, columns: list[str]) -> Filter:
    by_lower = {c.lower(): c for c in columns}
    out, args, pos, depth = [], [], 0, 0
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FilterError(f"filter: unexpected {text[pos:pos + 12]!r} at position {pos + 1}")
        pos = m.end()
        if m.group("number"):
            out.append("%s")
            args.append(m.group("number"))
        elif m.group("string"):
            s = m.group("string")
            q = s[0]
            body = s[1:-1].replace(q + q, q)
            out.append("%s")
            args.append(re.sub(r"\\(.)", r"\1", body))
        elif m.group("name"):
            name = m.group("name")
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            elif name.upper() in KEYWORDS:
                out.append(name.upper())
                continue
            if name.lower() not in by_lower:
                raise FilterError(f"filter: {name!r} is not a column of the table (columns: {', '.join(columns)})")
            if TOKEN.match(text, pos) and text[pos:].lstrip().startswith("("):
                raise FilterError(f"filter: {name!r}(...): functions are not allowed")
            out.append(db.quote_name(by_lower[name.lower()]))
        else:
            op = m.group("op")
            depth += {"(": 1, ")": -1}.get(op, 0)
            if depth < 0:
                raise FilterError("filter: ')' without '('")
            out.append(op)
    if depth:
        raise FilterError("filter: '(' without ')'")
    return Filter(" ".join(out), args)


def columns(conn, schema: str, table: str) -> list[str]:
    return [r[0] for r in db.rows(conn, "SELECT COLUMN_NAME FROM information_schema.COLUMNS "
                                        "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
                                  (schema, table))]


def page(conn, schema: str, table: str, after: int = 0, flt: Filter | None = None, state: str | None = None,
         limit: int = PAGE_ROWS) -> tuple[list[str], list[tuple]]:
    """(column names, rows): each row is (row id, state, column values...), ids above `after`."""
    where = ["queue_scan_rowid() > %s"]
    args: list = [after]
    if state:
        where.append("queue_scan_state() = %s")
        args.append(state)
    if flt and flt.sql:
        where.append(f"({flt.sql})")
        args += flt.args
    sql = (f"SELECT queue_scan_rowid(), queue_scan_state(), t.* FROM {db.quote_name(schema)}.{db.quote_name(table)} t "
           f"WHERE {' AND '.join(where)} LIMIT {int(limit)}")
    with conn.cursor() as cur:
        cur.execute(sql, args)
        names = [d[0] for d in cur.description][2:]
        return names, list(cur.fetchall())


def history_page(conn, schema: str, table: str, after: int = 0, flt: Filter | None = None,
                 limit: int = PAGE_ROWS) -> tuple[list[str], list[tuple]]:
    """The table's history (HISTORY_RETENTION) a page at a time, as page(): each row is (row id,
    how it ended, deliveries, end time, column values...)."""
    where = ["queue_scan_history()", "queue_scan_rowid() > %s"]
    args: list = [after]
    if flt and flt.sql:
        where.append(f"({flt.sql})")
        args += flt.args
    sql = ("SELECT queue_scan_rowid(), SUBSTRING(queue_scan_state(), 7), queue_scan_deliveries(), "
           "FROM_UNIXTIME(queue_scan_ended_at() DIV 1000), t.* "
           f"FROM {db.quote_name(schema)}.{db.quote_name(table)} t WHERE {' AND '.join(where)} LIMIT {int(limit)}")
    with conn.cursor() as cur:
        cur.execute(sql, args)
        names = [d[0] for d in cur.description][4:]
        return names, list(cur.fetchall())
