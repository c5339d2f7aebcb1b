"""Connections to MariaDB: the sampler's, and one per dashboard request with the logged-in
account's own credentials (so the server checks every privilege)."""
import pymysql

from .config import Config

CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 30


def connect_args(user: str, password: str) -> dict:
    return dict(user=user, password=password, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S, write_timeout=READ_TIMEOUT_S, charset="utf8mb4")


def connect(cfg: Config, user: str, password: str) -> pymysql.connections.Connection:
    kw = connect_args(user, password)
    if cfg.socket:
        return pymysql.connect(unix_socket=cfg.socket, **kw)
    return pymysql.connect(host=cfg.host, port=cfg.port, **kw)


def rows(conn, sql: str, args=None) -> list:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def dict_rows(conn, sql: str, args=None) -> list[dict]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_argument(schema: str, table: str) -> str:
    """A table as the queue functions' first argument names it: `schema`.`table`, quoted, so
    that any name reaches the engine whole (`t:x` would otherwise read as a condition, `a.b`
    as a database and a table)."""
    return f"{quote_name(schema)}.{quote_name(table)}"


# The same, written by the server for every row of information_schema.QUEUE_TABLES.
TABLE_ARGUMENT_SQL = ("CONCAT('`', REPLACE(TABLE_SCHEMA, '`', '``'), '`.`', REPLACE(TABLE_NAME, '`', '``'), '`')")
