"""What an operator may do from the dashboard, each through SQL with the operator's own
connection: the server checks the privileges (queue_allowed() tells the page which buttons
to show; the functions check again when called)."""
import pymysql

from . import db

# action -> the engine function it calls (docs/sql-api.md, "Operators' functions")
FUNCTIONS = {"redrive": "queue_redrive_dead", "purge": "queue_purge_dead", "release": "queue_release_owned"}


def allowed(conn, schema: str, table: str) -> dict:
    """{action: bool} for this account on the table, plus 'kill' (ending other accounts' connections)."""
    label = db.table_argument(schema, table)
    out = {}
    for action, fn in FUNCTIONS.items():
        out[action] = bool(db.rows(conn, "SELECT queue_allowed(%s, %s)", (label, fn))[0][0])
    out["kill"] = can_kill_any(conn)
    return out


def can_kill_any(conn) -> bool:
    """SUPER or CONNECTION ADMIN: KILL works on every connection (without, only on the account's own)."""
    return bool(db.rows(conn, "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES "
                              "WHERE PRIVILEGE_TYPE IN ('SUPER', 'CONNECTION ADMIN')")[0][0])


def redrive(conn, schema: str, table: str, max_rows: int | None) -> int:
    args = (db.table_argument(schema, table),) + (() if max_rows is None else (max_rows,))
    return db.rows(conn, f"SELECT queue_redrive_dead({', '.join(['%s'] * len(args))})", args)[0][0]


def purge(conn, schema: str, table: str, max_rows: int | None) -> int:
    args = (db.table_argument(schema, table),) + (() if max_rows is None else (max_rows,))
    return db.rows(conn, f"SELECT queue_purge_dead({', '.join(['%s'] * len(args))})", args)[0][0]


def release(conn, schema: str, table: str, row_id: int) -> int:
    return db.rows(conn, "SELECT queue_release_owned(%s, %s)", (db.table_argument(schema, table), row_id))[0][0]


def kill_connection(conn, connection_id: int):
    db.rows(conn, "KILL CONNECTION %s", (connection_id,))


def error_text(e: pymysql.MySQLError) -> str:
    return f"error {e.args[0]}: {e.args[1]}" if len(e.args) >= 2 else str(e)
