"""Every column type against every option that names a column, and against conditions: each
CREATE or ALTER either works (and the queue then hands the row out) or is refused with error
1478 naming the table, the option and the column's type; a condition on the column either
works or is refused naming the column. Never a crash: naming a VARCHAR's type once crashed
the server."""
import pytest

from sqlcheck import query, sql_error, value

# type, a value of it, accepted by VISIBLE_AT_COLUMN, by MESSAGE_GROUP_COLUMN, by conditions
TYPES = [
    ("INT", "7", False, True, True),
    ("BIGINT UNSIGNED", "18446744073709551615", False, True, True),
    ("DECIMAL(10,2)", "1.50", False, True, False),
    ("FLOAT", "1.5", False, False, True),
    ("DOUBLE", "1.5", False, False, True),
    ("BIT(8)", "b'101'", False, True, False),
    ("CHAR(10)", "'x'", False, True, True),
    ("VARCHAR(20)", "'x'", False, True, True),
    ("BINARY(4)", "'ab'", False, True, True),
    ("VARBINARY(20)", "'ab'", False, True, True),
    ("TEXT", "'x'", False, False, True),
    ("BLOB", "'x'", False, False, True),
    ("JSON", "'{}'", False, False, True),
    ("ENUM('a','b')", "'b'", False, True, False),
    ("SET('a','b')", "'a,b'", False, True, False),
    ("DATE", "'2024-01-01'", False, True, True),
    ("DATETIME(3)", "'2024-01-01 00:00:00.5'", False, True, True),
    ("TIME", "'01:00:00'", False, True, True),
    ("YEAR", "2024", False, True, True),
    ("TIMESTAMP(3) NULL", "'2020-01-01 00:00:00'", True, True, True),
    # Stored like CHAR, but binary: a condition comparing them as strings would never match.
    ("INET6", "'::1'", False, True, False),
    ("UUID", "'123e4567-e89b-12d3-a456-426655440000'", False, True, False),
    ("VARCHAR(20) COMPRESSED", "'x'", False, False, False),
    ("BLOB COMPRESSED", "'x'", False, False, False),
]


def _alive(server):
    assert server.value("SELECT 1") == 1, "the server did not survive"


def _check_row_goes_out(server, c):
    assert value(c, "SELECT queue_wait('test.f', 0)") == 1
    assert value(c, "SELECT COUNT(*) FROM test.f") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT COUNT(*) FROM test.f") == 0


@pytest.mark.parametrize("option", ["VISIBLE_AT_COLUMN", "MESSAGE_GROUP_COLUMN"])
@pytest.mark.parametrize("sql_type, sample, visible_at_ok, group_ok, cond_ok", TYPES,
                         ids=[t[0] for t in TYPES])
def test_an_option_names_any_column_type_without_harm(server, option, sql_type, sample, visible_at_ok,
                                                      group_ok, cond_ok):
    accepted = visible_at_ok if option == "VISIBLE_AT_COLUMN" else group_ok
    c = server.connect()
    create = f"CREATE TABLE test.f (id INT, c {sql_type}) ENGINE=QUEUE"
    for how in ("create", "alter"):
        server.sql("DROP TABLE IF EXISTS test.f")
        if how == "create":
            statement = f"{create} {option}='c'"
        else:
            server.sql(create)
            statement = f"ALTER TABLE test.f {option}='c'"
        if accepted:
            query(c, statement)
            query(c, f"INSERT INTO test.f VALUES (1, {sample})")
            _check_row_goes_out(server, c)
        else:
            code, msg = sql_error(c, statement)
            assert code == 1478, (statement, code, msg)
            for fragment in ("QUEUE table 'test.f'", f"{option}: column `c` is "):
                assert fragment in msg, (statement, msg)
        _alive(server)


@pytest.mark.parametrize("sql_type, sample, visible_at_ok, group_ok, cond_ok", TYPES,
                         ids=[t[0] for t in TYPES])
def test_a_condition_on_any_column_type_works_or_names_the_column(server, sql_type, sample, visible_at_ok,
                                                                  group_ok, cond_ok):
    server.sql(f"CREATE TABLE test.f (id INT, c {sql_type}) ENGINE=QUEUE")
    c = server.connect()
    query(c, f"INSERT INTO test.f VALUES (1, {sample})")
    try:
        got = value(c, "SELECT queue_wait('test.f:c is not null', 0)")
    except Exception as e:  # noqa: BLE001 - the refusal is what is checked
        assert not cond_ok, f"{sql_type}: {e}"
        assert "column 'c'" in str(e), f"{sql_type}: {e}"
    else:
        assert cond_ok, f"{sql_type}: a condition on it was accepted"
        assert got == 1
        assert value(c, "SELECT queue_end()") == 1
    _alive(server)
