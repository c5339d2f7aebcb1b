"""CREATE (column types, no indexes), UPDATE rejected, DROP/RENAME/TRUNCATE/ALTER."""
import os

import pytest

from sqlcheck import expect_error, query, sql_error

ALL_TYPES = """(
  ord INT NOT NULL,
  ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, i INT, bi BIGINT UNSIGNED, sbi BIGINT,
  f FLOAT, d DOUBLE, dec1 DECIMAL(30,6), bt BIT(10), y YEAR, dt DATE, tm TIME(3),
  dtm DATETIME(6), dt0 DATETIME, ts TIMESTAMP(6) NULL DEFAULT NULL,
  c CHAR(10), vc VARCHAR(300), u8 VARCHAR(40) CHARACTER SET utf8mb4, vb VARBINARY(50), bn BINARY(4),
  tx TEXT, lt LONGTEXT, bl BLOB, mb MEDIUMBLOB, j JSON,
  e ENUM('a','b','c'), st SET('x','y','z'), ip INET6, uu UUID, g POINT
)"""

ROWS = [
    # every nullable column NULL
    "(1, NULL,NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL,"
    " NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL,NULL,NULL)",
    # typical values
    "(2, -5, 65535, -8388608, 42, 12345678901234, -9, 1.5, 2.25, 12345.678901, b'1010101010', 2024,"
    " '2024-02-29', '-838:59:59.999', '2024-02-29 23:59:59.123456', '1999-12-31 00:00:01',"
    " '2030-01-02 03:04:05.000006', 'abc', 'hello queue', 'gr\u00fc\u00dfe \U0001F600', x'00ff00',"
    " x'01020304', 'text', REPEAT('L', 70000), x'000102', REPEAT(x'ab', 200000),"
    " '{\"k\": [1, 2, {\"n\": null}]}', 'b', 'x,z', '2001:db8::1',"
    " '123e4567-e89b-12d3-a456-426614174000', ST_GeomFromText('POINT(1 2)'))",
    # extremes and empties
    "(3, 127, 0, 8388607, -2147483648, 18446744073709551615, -9223372036854775808, -3.4e38, 1e308,"
    " -99999999999999999999999.999999, b'0', 1901, '1000-01-01', '00:00:00', '9999-12-31 23:59:59.999999',"
    " '1000-01-01 00:00:00', '1970-01-01 00:00:01', '', '', '', '', x'00000000', '', '', '', '', '[]',"
    " 'c', '', '::', '00000000-0000-0000-0000-000000000000', ST_GeomFromText('POINT(-1 -2)'))",
]


def _create_pair(server):
    server.sql("SET time_zone = '+00:00'")
    server.sql(f"CREATE TABLE test.q {ALL_TYPES} ENGINE=QUEUE")
    server.sql(f"CREATE TABLE test.ref {ALL_TYPES} ENGINE=InnoDB")


def test_all_column_types_round_trip(server):
    _create_pair(server)
    for r in ROWS:
        server.sql(f"INSERT INTO test.q VALUES {r}")
        server.sql(f"INSERT INTO test.ref VALUES {r}")
    got = server.sql("SELECT * FROM test.q ORDER BY ord")
    want = server.sql("SELECT * FROM test.ref ORDER BY ord")
    assert len(want) == len(ROWS)
    for g, w in zip(got, want):
        assert g == w
    # and in the engine's own order (insertion order), without ORDER BY
    assert server.sql("SELECT * FROM test.q") == want


def test_insert_select_round_trip(server):
    _create_pair(server)
    server.sql(f"INSERT INTO test.ref VALUES {', '.join(ROWS)}")
    server.sql("INSERT INTO test.q SELECT * FROM test.ref ORDER BY ord")
    assert server.sql("SELECT * FROM test.q") == server.sql("SELECT * FROM test.ref ORDER BY ord")


def test_many_columns(server):
    cols = ", ".join(f"c{i} INT" for i in range(200))
    server.sql(f"CREATE TABLE test.q ({cols}) ENGINE=QUEUE")
    vals = ", ".join(str(i * 7 if i % 3 else -i) for i in range(200))
    server.sql(f"INSERT INTO test.q VALUES ({vals})")
    assert list(server.sql("SELECT * FROM test.q")[0]) == [i * 7 if i % 3 else -i for i in range(200)]


def test_large_blob_round_trip(server):
    server.sql("CREATE TABLE test.q (id INT, b LONGBLOB) ENGINE=QUEUE")
    payload = os.urandom(4 << 20)
    server.sql("INSERT INTO test.q VALUES (1, %s)", (payload,))
    assert server.sql("SELECT id, b FROM test.q") == [(1, payload)]


def test_show_create_table_says_queue(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    ddl = server.sql("SHOW CREATE TABLE test.q")[0][1]
    assert "ENGINE=QUEUE" in ddl.upper()


@pytest.mark.parametrize("ddl", [
    "CREATE TABLE test.q (id INT PRIMARY KEY) ENGINE=QUEUE",
    "CREATE TABLE test.q (id INT, PRIMARY KEY (id)) ENGINE=QUEUE",
    "CREATE TABLE test.q (id INT UNIQUE) ENGINE=QUEUE",
    "CREATE TABLE test.q (id INT, UNIQUE KEY u (id)) ENGINE=QUEUE",
    "CREATE TABLE test.q (id INT, INDEX (id)) ENGINE=QUEUE",
    "CREATE TABLE test.q (id INT, v INT, KEY k (id, v)) ENGINE=QUEUE",
    "CREATE TABLE test.q (id INT AUTO_INCREMENT, KEY (id)) ENGINE=QUEUE",
    "CREATE TABLE test.q (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT) ENGINE=QUEUE",
])
def test_indexes_are_rejected_with_the_contract_text(server, ddl):
    expect_error(server.admin(), ddl, "QUEUE table 'test.q' cannot have indexes")
    assert server.sql("SHOW TABLES FROM test LIKE 'q'") == []


@pytest.mark.parametrize("ddl", [
    "CREATE TABLE test.q (id INT AUTO_INCREMENT) ENGINE=QUEUE",  # the server's own "must be a key"
    "CREATE TABLE test.q (t TEXT, FULLTEXT (t)) ENGINE=QUEUE",
    "CREATE TABLE test.q (g POINT NOT NULL, SPATIAL INDEX (g)) ENGINE=QUEUE",
])
def test_other_key_forms_are_rejected(server, ddl):
    sql_error(server.admin(), ddl)
    assert server.sql("SHOW TABLES FROM test LIKE 'q'") == []


@pytest.mark.parametrize("ddl, text", [
    # Partitions would be separate queues that queue_wait() cannot name: the rows could be
    # inserted and read but never consumed.
    ("CREATE TABLE test.q (id INT) ENGINE=QUEUE PARTITION BY HASH(id) PARTITIONS 2",
     "QUEUE table 'test.q' cannot be partitioned"),
    ("CREATE TABLE test.q (id INT) ENGINE=QUEUE WITH SYSTEM VERSIONING",
     "QUEUE table 'test.q' cannot be WITH SYSTEM VERSIONING"),
])
def test_partitions_and_system_versioning_are_rejected(server, ddl, text):
    expect_error(server.admin(), ddl, text)
    assert server.sql("SHOW TABLES FROM test LIKE 'q'") == []
    server.sql("CREATE TABLE test.q (id INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1)")
    later = "ALTER TABLE test.q " + ("PARTITION BY HASH(id) PARTITIONS 2" if "PARTITION" in ddl
                                    else "ADD SYSTEM VERSIONING")
    expect_error(server.admin(), later, text)
    assert server.sql("SELECT id FROM test.q") == [(1,)]
    server.sql("DROP TABLE test.q")
    server.sql("CREATE TABLE test.q (id INT) ENGINE=InnoDB PARTITION BY HASH(id) PARTITIONS 2")
    expect_error(server.admin(), "ALTER TABLE test.q ENGINE=QUEUE", "QUEUE table 'test.q' cannot be partitioned",
                 "use one QUEUE table per partition", code=1478)
    # Per-partition engines cannot sneak one in either.
    expect_error(server.admin(), "ALTER TABLE test.q ADD PARTITION (PARTITION p9 ENGINE=QUEUE)")
    expect_error(server.admin(), "CREATE TABLE test.m (id INT) PARTITION BY HASH(id) "
                                 "(PARTITION a ENGINE=QUEUE, PARTITION b ENGINE=QUEUE)",
                 "QUEUE table 'test.m' cannot be partitioned")
    server.check_alive()
    assert sorted(f.name for f in (server.datadir / "test").iterdir() if f.name.startswith(("q.", "m.", "q#", "m#"))
                  ) == ["q#P#p0.ibd", "q#P#p1.ibd", "q.frm", "q.par"]


@pytest.mark.parametrize("option", ["DATA", "INDEX"])
def test_a_directory_for_the_data_file_is_refused_not_ignored(server, option):
    """The data file always lives in the datadir (DROP, RENAME, compaction and recovery
    find it there). A queue meant for another disk must not land there unnoticed."""
    other = server.root / f"elsewhere-{option}"
    other.mkdir(exist_ok=True)
    expect_error(server.admin(), f"CREATE TABLE test.q (v INT) ENGINE=QUEUE {option} DIRECTORY='{other}'",
                 f"QUEUE table 'test.q' cannot have {option} DIRECTORY", "remove the option", code=1478)
    assert server.sql("SHOW TABLES FROM test LIKE 'q'") == []
    assert list(other.iterdir()) == []


def test_converting_a_table_with_data_directory_warns_that_it_moves(server):
    """ALTER TABLE ... ENGINE=QUEUE of a table kept elsewhere: the server itself ignores the
    option in ALTER TABLE (warning 1618), and the user could not take it off; the queue says
    where its rows go, the same way."""
    other = server.root / "elsewhere-myisam"
    other.mkdir(exist_ok=True)
    server.sql(f"CREATE TABLE test.q (v INT) ENGINE=MyISAM DATA DIRECTORY='{other}' INDEX DIRECTORY='{other}'")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    c = server.admin()
    query(c, "ALTER TABLE test.q ENGINE=QUEUE")
    warnings = query(c, "SHOW WARNINGS")
    assert [(w[1], "<DATA DIRECTORY> option ignored" in w[2] or "<INDEX DIRECTORY> option ignored" in w[2])
            for w in warnings] == [(1618, True), (1618, True)], warnings
    assert all("QUEUE table 'test.q'" in w[2] for w in warnings)
    assert server.sql("SELECT v FROM test.q") == [(1,), (2,)]
    assert "DIRECTORY" not in server.sql("SHOW CREATE TABLE test.q")[0][1]


def test_row_format_is_named_as_ignored_when_given(server):
    """The server accepts ROW_FORMAT for every engine; a queue has one format, so a
    ROW_FORMAT=COMPRESSED is answered with a warning, not taken silently. One inherited by
    ALTER TABLE ... ENGINE=QUEUE (not written by the user) is not warned about."""
    c = server.admin()
    query(c, "CREATE TABLE test.q (v INT) ENGINE=QUEUE ROW_FORMAT=COMPRESSED")
    warnings = query(c, "SHOW WARNINGS")
    assert len(warnings) == 1 and warnings[0][1] == 1618, warnings
    assert "QUEUE table 'test.q': <ROW_FORMAT=COMPRESSED> option ignored" in warnings[0][2]
    query(c, "CREATE TABLE test.d (v INT) ENGINE=QUEUE ROW_FORMAT=DEFAULT")
    assert query(c, "SHOW WARNINGS") == []
    query(c, "CREATE TABLE test.i (v INT) ENGINE=InnoDB ROW_FORMAT=DYNAMIC")
    query(c, "ALTER TABLE test.i ENGINE=QUEUE")
    assert query(c, "SHOW WARNINGS") == []


def test_index_rejection_names_the_database(server):
    server.sql("CREATE DATABASE other")
    expect_error(server.admin(), "CREATE TABLE other.q (id INT PRIMARY KEY) ENGINE=QUEUE",
                 "QUEUE table 'other.q' cannot have indexes")


@pytest.mark.parametrize("ddl", [
    "ALTER TABLE test.q ADD INDEX (v)",
    "ALTER TABLE test.q ADD PRIMARY KEY (v)",
    "CREATE INDEX i ON test.q (v)",
])
def test_adding_an_index_later_is_rejected(server, ddl):
    server.sql("CREATE TABLE test.q (v INT NOT NULL) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    expect_error(server.admin(), ddl, "QUEUE table 'test.q' cannot have indexes")
    assert server.sql("SELECT v FROM test.q") == [(1,), (2,)]


def test_alter_innodb_table_with_key_to_queue_is_rejected(server):
    server.sql("CREATE TABLE test.q (v INT PRIMARY KEY) ENGINE=InnoDB")
    expect_error(server.admin(), "ALTER TABLE test.q ENGINE=QUEUE", "QUEUE table 'test.q' cannot have indexes")


def test_update_is_rejected(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    expect_error(server.admin(), "UPDATE test.q SET v = v + 1",
                 "QUEUE table 'test.q' does not support UPDATE")
    expect_error(server.admin(), "UPDATE test.q SET v = 5 WHERE v = 2",
                 "QUEUE table 'test.q' does not support UPDATE")
    assert server.sql("SELECT v FROM test.q") == [(1,), (2,)]


def _queue_files(server, db, table):
    d = server.datadir / db
    return sorted(p.name for p in d.iterdir() if p.name.split(".")[0] == table) if d.exists() else []


def test_drop_table_removes_it_and_its_files(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    assert _queue_files(server, "test", "q")
    server.sql("DROP TABLE test.q")
    assert _queue_files(server, "test", "q") == []
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    assert server.value("SELECT queue_wait('test.q', 0)") == 0


def test_drop_database_with_queue_tables(server):
    server.sql("CREATE DATABASE other")
    server.sql("CREATE TABLE other.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO other.q VALUES (1)")
    server.sql("DROP DATABASE other")
    assert not (server.datadir / "other").exists()


def test_rename_keeps_rows(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    server.sql("RENAME TABLE test.q TO test.q2")
    assert server.sql("SELECT v FROM test.q2") == [(1,), (2,), (3,)]
    expect_error(server.admin(), "SELECT queue_wait('test.q', 0)", "table 'test.q' does not exist")
    assert server.value("SELECT queue_wait('test.q2', 0)") == 1
    server.sql("SELECT queue_end()")
    assert server.sql("SELECT v FROM test.q2") == [(2,), (3,)]


def test_rename_to_another_database(server):
    server.sql("CREATE DATABASE other")
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    server.sql("RENAME TABLE test.q TO other.q")
    assert server.sql("SELECT v FROM other.q") == [(1,), (2,)]
    server.sql("INSERT INTO other.q VALUES (3)")
    assert server.value("SELECT COUNT(*) FROM other.q") == 3
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    assert server.value("SELECT COUNT(*) FROM test.q") == 0


def test_truncate_empties_and_table_stays_usable(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    server.sql("TRUNCATE TABLE test.q")
    assert server.value("SELECT COUNT(*) FROM test.q") == 0
    assert server.sql("SELECT * FROM test.q") == []
    server.sql("INSERT INTO test.q VALUES (4)")
    assert server.sql("SELECT v FROM test.q") == [(4,)]
    assert server.value("SELECT queue_wait('test.q', 0)") == 1
    assert server.sql("SELECT v FROM test.q") == [(4,)]
    assert server.value("SELECT queue_end()") == 1


def test_alter_add_and_drop_columns_keeps_rows(server):
    server.sql("CREATE TABLE test.q (a INT, b VARCHAR(10)) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1, 'x'), (2, 'y')")
    server.sql("ALTER TABLE test.q ADD COLUMN c INT NOT NULL DEFAULT 7")
    assert server.sql("SELECT a, b, c FROM test.q") == [(1, "x", 7), (2, "y", 7)]
    server.sql("ALTER TABLE test.q DROP COLUMN b, MODIFY a BIGINT")
    assert server.sql("SELECT * FROM test.q") == [(1, 7), (2, 7)]
    server.sql("INSERT INTO test.q VALUES (3, 8)")
    assert server.sql("SELECT * FROM test.q") == [(1, 7), (2, 7), (3, 8)]


def test_alter_engine_both_ways_keeps_rows(server):
    server.sql("CREATE TABLE test.q (a INT, b TEXT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1, 'x'), (2, NULL)")
    server.sql("ALTER TABLE test.q ENGINE=InnoDB")
    assert server.sql("SELECT a, b FROM test.q ORDER BY a") == [(1, "x"), (2, None)]
    server.sql("ALTER TABLE test.q ENGINE=QUEUE")
    assert server.sql("SELECT a, b FROM test.q") == [(1, "x"), (2, None)]
    assert server.value("SELECT queue_wait('test.q', 0)") == 1


def test_create_like_and_create_select(server):
    server.sql("CREATE TABLE test.q (a INT, b TEXT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1, 'x'), (2, 'y')")
    server.sql("CREATE TABLE test.q2 LIKE test.q")
    assert server.value("SELECT COUNT(*) FROM test.q2") == 0
    assert "ENGINE=QUEUE" in server.sql("SHOW CREATE TABLE test.q2")[0][1].upper()
    server.sql("CREATE TABLE test.q3 ENGINE=QUEUE SELECT a, b FROM test.q")
    assert server.sql("SELECT a, b FROM test.q3") == [(1, "x"), (2, "y")]


def test_temporary_queue_tables_are_refused_naming_the_table(server):
    """A temporary table is private to its session and gone with it: no queue. It was
    accepted, and then ignored MAX_ROWS (its "#sql" file name is that of an ALTER's copy)."""
    c = server.connect()
    expect_error(c, "CREATE TEMPORARY TABLE tq (v INT) ENGINE=QUEUE MAX_ROWS=1",
                 "QUEUE table 'test.tq' cannot be TEMPORARY", "without TEMPORARY", code=1478)
    query(c, "CREATE TEMPORARY TABLE ti (v INT) ENGINE=InnoDB")
    query(c, "INSERT INTO ti VALUES (1)")
    expect_error(c, "ALTER TABLE ti ENGINE=QUEUE", "QUEUE table 'test.ti' cannot be TEMPORARY", code=1478)
    assert query(c, "SELECT v FROM ti") == [(1,)]  # the InnoDB table is as it was
    assert not [f.name for f in (server.datadir / "test").iterdir() if "tq" in f.name or f.name.startswith("#sql")]
    assert server.value("SELECT 1") == 1


