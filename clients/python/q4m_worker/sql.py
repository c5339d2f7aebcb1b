"""Table names as queue functions take them ('db.t') and as SQL takes them (`db`.`t`)."""


def split_table(table):
    """'db.t' -> ('db', 't'); 't' -> (None, 't'). Names with a '.' or ':' are not supported
    here (quote them yourself and pass the SQL pieces)."""
    if not table or not isinstance(table, str):
        raise ValueError(f"q4m: invalid table name {table!r}")
    if ":" in table or "`" in table or "@" in table:
        raise ValueError(f"q4m: table {table!r}: give a plain name ('t' or 'db.t'); a condition "
                         "goes in Worker(condition=...), a subscription in Worker(subscription=...)")
    db, dot, name = table.partition(".")
    return (db, name) if dot else (None, table)


def check_subscription(name):
    """A subscription's name as queue_subscribe() allows it (1 to 64 letters, digits, '_', '-')."""
    if not isinstance(name, str) or not 1 <= len(name) <= 64 or \
            not all(c.isascii() and (c.isalnum() or c in "_-") for c in name):
        raise ValueError(f"q4m: invalid subscription name {name!r}: 1 to 64 letters, digits, '_' and '-'")
    return name


def quote_ident(name):
    return "`" + name.replace("`", "``") + "`"


def quote_table(table):
    db, name = split_table(table)
    return (quote_ident(db) + "." if db else "") + quote_ident(name)
