"""Errors and the MariaDB error codes the worker tells apart."""
import pymysql


class ConfigError(ValueError):
    """The table or the arguments do not allow what was asked (names the table and option)."""


class JobAbandoned(RuntimeError):
    """The worker gave the job back (stop deadline passed, lease lost): its connection is
    closed, so a transactional handler's writes can no longer commit."""


# queue_end()/queue_wait() after the lease ran out (or queue_release_owned()): the row went
# back to the queue and was not removed (docs/sql-api.md, "Leases").
ER_LEASE_EXPIRED = 1205
# The connection is gone: the server gives its owned row back and rolls back its transaction.
CONNECTION_LOST = {2002, 2003, 2006, 2013, 2055, 1053, 1927, 4031}


def error_code(exc):
    return exc.args[0] if getattr(exc, "args", None) and isinstance(exc.args[0], int) else None


def is_connection_lost(exc):
    if isinstance(exc, pymysql.err.InterfaceError):
        return True
    if isinstance(exc, (ConnectionError, OSError)) and not isinstance(exc, pymysql.MySQLError):
        return True
    return isinstance(exc, pymysql.MySQLError) and error_code(exc) in CONNECTION_LOST


def is_lease_lost(exc):
    return isinstance(exc, pymysql.MySQLError) and error_code(exc) == ER_LEASE_EXPIRED
