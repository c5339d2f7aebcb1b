"""Issue 43: a deep backlog of plain rows costs little RAM (the row index folds runs of plain
rows into cold blocks that read their entries back from the data file, core/row/index.h), and
the engine says how much it holds: queue_stats(), INFORMATION_SCHEMA.QUEUE_TABLES, SHOW ENGINE
QUEUE STATUS. Rows come back right from cold blocks: from the front, by a condition that matches
only the last row, after a clean restart (index snapshot) and after kill -9 (recovery)."""
from binlog_modes import both_binlog_modes

N = 40000
BLOCK = 4096
# Two blocks at the front and the tail stay hot at ~45 B a row; the rest costs ~0.35 B.
BOUND = 2 * N + 4 * BLOCK * 48


def _fill(server):
    server.sql("CREATE TABLE test.deep (v INT NOT NULL, pad CHAR(20) NOT NULL) ENGINE=QUEUE")
    for start in range(1, N + 1, 10000):
        server.sql(f"INSERT INTO test.deep SELECT seq, 'x' FROM seq_{start}_to_{start + 9999}")


def _memory(server):
    table = server.queue_stats("test.deep")["memory_bytes"]
    column = server.value("SELECT MEMORY_BYTES FROM INFORMATION_SCHEMA.QUEUE_TABLES "
                          "WHERE TABLE_SCHEMA = 'test' AND TABLE_NAME = 'deep'")
    engine = {name: int(v) for _, name, v in server.sql("SHOW ENGINE QUEUE STATUS")}["memory_bytes"]
    return table, column, engine


def _take_ids(server, n):
    c = server.connect()
    got = []
    for _ in range(n):
        assert server.value("SELECT queue_wait('test.deep', 0)", conn=c) == 1
        got.append(server.value("SELECT v FROM test.deep", conn=c))
    assert server.value("SELECT queue_end()", conn=c) == 1
    return got


def _check_rows(server, first):
    assert server.value("SELECT COUNT(*) FROM test.deep") == N - first + 1 - 1  # the last row was taken
    assert _take_ids(server, 3) == [first, first + 1, first + 2]


@both_binlog_modes  # binary log on: every INSERT commits in two phases (TXN_ROW records): they fold too
def test_deep_backlog_costs_under_two_bytes_a_row_and_is_reported(fresh_server, binlog):
    s = fresh_server
    _fill(s)
    table, column, engine = _memory(s)
    assert 0 < table <= BOUND, table
    assert column > 0 and abs(column - table) <= table // 10
    assert engine >= table // 2  # the engine's total, refreshed as rows come and go
    # A condition that matches only the last row reads its way through the cold blocks.
    c = s.connect()
    assert s.value(f"SELECT queue_wait('test.deep:v={N}', 0)", conn=c) == 1
    assert s.value("SELECT v FROM test.deep", conn=c) == N
    assert s.value("SELECT queue_end()", conn=c) == 1
    _check_rows(s, 1)
    for kill in (False, True):
        s.restart(kill=kill)
        table, _, _ = _memory(s)
        assert 0 < table <= BOUND, (kill, table)
    _check_rows(s, 4)


@both_binlog_modes
def test_rows_of_cold_blocks_come_back_in_order_after_restarts(fresh_server, binlog):
    s = fresh_server
    _fill(s)
    c = s.connect()
    assert s.value(f"SELECT queue_wait('test.deep:v={N}', 0)", conn=c) == 1
    assert s.value("SELECT queue_end()", conn=c) == 1
    s.restart(kill=True)
    _check_rows(s, 1)
    s.restart()
    _check_rows(s, 4)
    # A compaction rewrites them all (two-phase ones as ROW records); they stay folded.
    s.sql("SELECT queue_compact('test.deep')")
    s.sql("INSERT INTO test.deep VALUES (0, 'x')")  # folding runs as rows come and go
    c = s.connect()
    for _ in range(1100):
        assert s.value("SELECT queue_wait('test.deep', 0)", conn=c) == 1
    assert s.value("SELECT queue_end()", conn=c) == 1
    assert 0 < _memory(s)[0] <= BOUND


@both_binlog_modes
def test_a_cold_block_the_file_cannot_give_back_is_an_sql_error_naming_the_table(fresh_server, binlog):
    import os
    import pymysql
    import pytest
    s = fresh_server
    _fill(s)
    path = s.datadir / "test" / "deep.Q4M"
    os.truncate(path, os.path.getsize(path) // 2)  # the rows of the second half are gone
    for sql in (f"SELECT queue_wait('test.deep:v={N}', 0)", f"SELECT v FROM test.deep WHERE v = {N}"):
        with pytest.raises(pymysql.err.MySQLError) as e:
            s.sql(sql)
        assert "test.deep" in str(e.value) and "deep.Q4M" in str(e.value), (sql, e.value)
        assert "cannot read back" in str(e.value), e.value
    assert s.value("SELECT 1") == 1  # the server is up
    assert _take_ids(s, 2) == [1, 2]  # and the rows before the cut come out
