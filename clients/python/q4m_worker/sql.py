"""Table names as queue functions take them ('db.t') and as SQL takes them (`db`.`t`)."""


def split_table(table):
    """'db.t' -> ('db', 't'); 't' -> (None, 't'). Names with a '.' or ':' are not supported
    here (quote them yourself and pass the SQL pieces)."""
    if not table or not isinstance(table, str):
        raise ValueError(f"q4m: invalid table name {table!r}")
    if ":" in table or "`" in table:
        raise ValueError(f"q4m: table {table!r}: give a plain name ('t' or 'db.t'); a condition "
                         "goes in Worker(condition=...)")
    db, dot, name = table.partition(".")
    return (db, name) if dot else (None, table)


def quote_ident(name):
    return "`" + name.replace("`", "``") + "`"


def quote_table(table):
    db, name = split_table(table)
    return (quote_ident(db) + "." if db else "") + quote_ident(name)
