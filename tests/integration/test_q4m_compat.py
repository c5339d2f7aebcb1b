"""docs/q4m-differences.md, checked where no other test file does: the answers q4m gives to
Q4M 0.9's SQL where they differ on purpose (source ids, queue_stats(), SHOW ENGINE QUEUE STATUS,
conditions, a Q4M data file, installing), the statements of Q4M's q4m-forward and my.cnf, and
the migration recipe: MySQL 5.7 and 8.0 mysqldump files of Q4M tables (fixtures/) loaded with
the recipe's own commands, then consumed in order; and a q4m table dumped and restored
elsewhere in order. The doc names the other test files for the rest."""
import calendar
import datetime
import json
import os
import re
import struct
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from q4m_server import _tool
from sqlcheck import expect_error, query, value

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "q4m-differences.md"
FIXTURES = HERE / "fixtures"

ER_SP_DOES_NOT_EXIST = 1305
ER_WRONG_ARGUMENTS = 1210
ER_ILLEGAL_HA = 1031  # Q4M's UPDATE error (HA_ERR_WRONG_COMMAND)


# ---- installing ---------------------------------------------------------------------------

def test_installing_the_engine_alone_leaves_out_the_functions(server_factory):
    s = server_factory.new(install=False)
    try:
        s.sql("INSTALL PLUGIN queue SONAME 'ha_queue'")  # Q4M's install line, library renamed
        assert s.value("SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE='QUEUE'") == "YES"
        s.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
        expect_error(s.admin(), "SELECT queue_wait('q', 0)", "queue_wait", code=ER_SP_DOES_NOT_EXIST)
        s.sql("INSTALL SONAME 'ha_queue'")  # adds what is missing
        assert s.value("SELECT queue_wait('q', 0)") == 0
    finally:
        s.destroy()


# ---- queue_set_srcid() and Q4M's relay ----------------------------------------------------

def test_set_srcid_takes_source_ids_past_q4m_limit(server):
    server.sql("CREATE TABLE test.d (v BIGINT) ENGINE=QUEUE")
    c = server.connect()
    for source in (64, 4294967295):  # Q4M: 0 to 63
        for v in (1, 2):  # the second is a replay of row 5
            assert value(c, f"SELECT queue_set_srcid({source}, 'a', 5)") == 1
            query(c, f"INSERT INTO d VALUES ({source + v})")
    assert [r[0] for r in query(c, "SELECT v FROM d")] == [65, 4294967296]
    for source in ("4294967296", "-1"):
        expect_error(c, f"SELECT queue_set_srcid({source}, 'a', 5)", "queue_set_srcid(): argument 1",
                     "from 0 to 4294967295", code=ER_WRONG_ARGUMENTS)
    # Q4M took a row id of 0 as "no relay", and read NULL arguments without a check
    expect_error(c, "SELECT queue_set_srcid(1, 'a', 0)", "queue_set_srcid(): argument 3",
                 "positive integer", code=ER_WRONG_ARGUMENTS)
    for position, call in enumerate(["queue_set_srcid(NULL, 'a', 5)", "queue_set_srcid(1, NULL, 5)",
                                     "queue_set_srcid(1, 'a', NULL)"], start=1):
        expect_error(c, f"SELECT {call}", f"queue_set_srcid(): argument {position}", code=ER_WRONG_ARGUMENTS)


def test_one_source_row_id_covers_the_first_row_of_an_insert(server):
    server.sql("CREATE TABLE test.d (v INT) ENGINE=QUEUE")
    c = server.connect()
    for _ in range(2):
        assert value(c, "SELECT queue_set_srcid(1, 'a', 5)") == 1
        with c.cursor() as cur:
            assert cur.execute("INSERT INTO d VALUES (1), (2)") == 2  # a dropped row still counts
            cur.execute("SHOW WARNINGS")
            notes = cur.fetchall()
    # Q4M dropped the second INSERT whole; here only its first row is source row 5
    assert [r[0] for r in query(c, "SELECT v FROM d")] == [1, 2, 2]
    assert notes == (("Note", 1105, "queue_set_srcid: row 5 of source 1 was already received by 'test.d'; "
                                   "dropped (last received: row 5)"),)


def test_q4m_forward_statements(server):
    """The statements of Q4M's support-files/q4m-forward (and its t/07-trans.t), parameters
    bound as its DBI calls bind them: every row relayed once, also across a relay restart."""
    server.sql("CREATE TABLE test.src (id INT NOT NULL, body VARCHAR(20)) ENGINE=QUEUE")
    server.sql("CREATE TABLE test.dst (id INT NOT NULL, body VARCHAR(20)) ENGINE=QUEUE")
    server.sql("INSERT INTO test.src VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    dst = server.connect()

    def relay_one(src, sender=0, mode="a"):
        wait = query(src, "select queue_wait(%s)", ("src",))
        assert wait[0][0] == 1, wait  # Q4M's relay dies on NULL, skips 0
        rowid = value(src, "select queue_rowid()")
        assert rowid
        with src.cursor() as cur:
            cur.execute("select * from src")
            names = [d[0] for d in cur.description]
            row = dict(zip(names, cur.fetchone()))
        assert value(dst, "select queue_set_srcid(%s,%s,%s)", (sender, mode, rowid)) == 1
        cols = sorted(row)
        query(dst, f"insert into dst ({','.join(cols)}) values ({','.join(['%s'] * len(cols))})",
              [row[k] for k in cols])
        return rowid

    relay = server.connect()
    relay_one(relay)
    relay_one(relay)
    last = relay_one(relay)
    relay.close()  # dies before its next wait: row 3 goes back to src
    again = server.connect()
    assert relay_one(again) == last  # relayed again, dropped by dst
    assert query(dst, "SELECT id, body FROM dst") == [(1, "a"), (2, "b"), (3, "c")]
    # t/07-trans.t: another source id is another record; 'w' resets the record
    assert value(again, "SELECT queue_abort()") == 1
    assert relay_one(again, sender=1) == last
    assert value(again, "SELECT queue_abort()") == 1
    assert relay_one(again, sender=1, mode="w") == last
    assert value(again, "SELECT queue_abort()") == 1
    assert relay_one(again, sender=1) == last
    assert [r[0] for r in query(dst, "SELECT id FROM dst")] == [1, 2, 3, 3, 3]


# ---- queue_stats(), SHOW ENGINE QUEUE STATUS, server variables ------------------------------

def test_queue_stats_is_a_json_object(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2), (3)")
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_wait('q', 0)") == 1  # ends row 1, takes row 2
    assert value(c, "SELECT queue_abort()") == 1
    stats = json.loads(server.value("SELECT queue_stats('test.q')"))
    assert stats["table"] == "test.q"
    assert (stats["rows_inserted"], stats["rows_removed"], stats["waits"], stats["aborts"]) == (3, 1, 2, 1)
    assert stats["rows"] == 2 and "handoffs" in stats
    assert not {"rows_written", "wait_immediate", "restored_by_abort"} & set(stats)  # Q4M's names
    assert server.value("SELECT JSON_VALUE(queue_stats('test.q'), '$.rows')") == "2"


Q4M_STATUS_COUNTERS = {  # Q4M's SHOW ENGINE QUEUE STATUS line -> q4m's row
    "sys_read": "sys_read", "sys_write": "sys_write", "sys_sync": "sys_sync",
    "append": "group_commits", "remove": "group_commits",
    "evaluation": "cond_evals", "compile": "cond_compiles", "compile_cachehit": "cond_cache_hits",
    "rows_written": "rows_written", "rows_removed": "rows_removed",
    "queue_wait": "waits", "queue_end": "ends", "queue_abort": "aborts",
}


def test_show_engine_queue_status_has_one_row_per_counter(server):
    def status():
        rows = server.sql("SHOW ENGINE QUEUE STATUS")
        assert all(r[0] == "QUEUE" and r[2].isdigit() for r in rows), rows
        names = [r[1] for r in rows]
        assert len(names) == len(set(names)), names
        return {r[1]: int(r[2]) for r in rows}

    before = status()
    assert set(Q4M_STATUS_COUNTERS.values()) <= set(before), sorted(before)
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1), (2)")
    c = server.connect()
    assert value(c, "SELECT queue_wait('q', 0)") == 1
    assert value(c, "SELECT queue_end()") == 1
    assert value(c, "SELECT queue_wait('q:v = 2', 0)") == 1
    assert value(c, "SELECT queue_abort()") == 1
    after = status()
    delta = {k: after[k] - before[k] for k in ("rows_written", "rows_removed", "waits", "ends", "aborts")}
    assert delta == {"rows_written": 2, "rows_removed": 1, "waits": 2, "ends": 1, "aborts": 1}, delta
    assert after["cond_evals"] > before["cond_evals"] and after["group_commits"] > before["group_commits"]


def test_q4m_my_cnf_lines_start_the_server(fresh_server):
    """[mysqld] lines of a Q4M my.cnf: values Q4M took, some of them outside q4m's ranges."""
    s = fresh_server
    s.restart(extra_args=["--queue_use_concurrent_compaction=1",
                          "--queue_concurrent_compaction_interval=1024",
                          "--queue_mmap_max=17179869184"])
    got = dict(s.sql("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('queue_use_concurrent_compaction', "
                     "'queue_concurrent_compaction_interval', 'queue_mmap_max')"))
    assert got == {"queue_use_concurrent_compaction": "ON", "queue_concurrent_compaction_interval": "4096",
                   "queue_mmap_max": "17179869184"}, got
    assert "queue-concurrent-compaction-interval" in s.err_log_since_start()  # the raise is logged
    s.sql("SET GLOBAL queue_use_concurrent_compaction = 0")  # dynamic, where Q4M's was read-only
    assert s.value("SELECT @@GLOBAL.queue_use_concurrent_compaction") == 0


def test_update_fails_with_q4m_error_code(server):
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.q VALUES (1)")
    expect_error(server.admin(), "UPDATE test.q SET v = 2", "does not support UPDATE", code=ER_ILLEGAL_HA)


def test_the_table_is_transactional_where_q4m_was_not(server):
    """Q4M kept rows a ROLLBACK should have undone (warning 1196); q4m takes part in the
    transaction (docs/transactions.md). Autocommit statements act at once, as in Q4M."""
    server.sql("CREATE TABLE test.q (v INT) ENGINE=QUEUE")
    c = server.connect(autocommit=False)
    query(c, "BEGIN")
    query(c, "INSERT INTO q VALUES (1)")
    query(c, "ROLLBACK")
    assert [w[1] for w in query(c, "SHOW WARNINGS")] == []
    assert server.sql("SELECT v FROM test.q") == []
    query(c, "SET autocommit = 1")
    query(c, "INSERT INTO q VALUES (2)")
    assert server.sql("SELECT v FROM test.q") == [(2,)]


# ---- data files ---------------------------------------------------------------------------

def _q4m_0_9_data_file():
    """The start of a Q4M 0.9 data file: its 4 KiB header (magic 'Q4M1', attributes, end,
    begin, first row id, 64 source offsets, row count, byte counts), then free space."""
    header = b"Q4M1" + struct.pack("<I", 0) + struct.pack("<QQQ", 4096, 4096, 1) + bytes(64 * 8)
    header += struct.pack("<QQQ", 0, 0, 0)
    return header + bytes(4 * 1024 * 1024 - len(header))


def test_a_q4m_data_file_is_refused_by_name(fresh_server):
    s = fresh_server
    s.sql("CREATE TABLE test.z (v INT) ENGINE=QUEUE")
    s.sql("INSERT INTO test.z VALUES (1)")
    s.stop()
    table_dir = s.datadir / "test"
    for f in table_dir.glob("z.Q4M*"):
        f.unlink()
    (table_dir / "z.Q4M").write_bytes(_q4m_0_9_data_file())
    s.start()
    c = s.connect()
    for sql in ("SELECT * FROM z", "INSERT INTO z VALUES (2)", "SELECT queue_wait('z', 0)"):
        expect_error(c, sql, "test.z", "z.Q4M: not a QUEUE data file (bad magic)")
    query(c, "DROP TABLE z")
    assert not list(table_dir.glob("z.*"))


# ---- conditions ---------------------------------------------------------------------------

def test_conditions_read_numbers_as_sql_does(server):
    server.sql("CREATE TABLE test.cq (v BIGINT, w INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.cq VALUES (8, 1), (10, 1), (1, NULL)")
    c = server.connect()
    assert value(c, "SELECT queue_wait('cq:v = 010', 0)") == 1  # Q4M: octal, 8
    assert query(c, "SELECT v FROM cq") == [(10,)]
    assert value(c, "SELECT queue_abort()") == 1
    # Q4M: (1 AND NULL) = 0, so NOT matched row (1, NULL)
    assert value(c, "SELECT queue_wait('cq:v = 1 AND NOT (v = 1 AND w > 0)', 0)") == 0
    # Q4M: 8 * (2^63 - 1) wrapped to -8
    assert value(c, "SELECT queue_wait('cq:v * 9223372036854775807 < 0', 0)") == 0
    assert value(c, "SELECT queue_wait('cq:v * 2 = 16', 0)") == 1
    assert query(c, "SELECT v FROM cq") == [(8,)]
    assert value(c, "SELECT queue_end()") == 1


# ---- the migration recipe -----------------------------------------------------------------

def _recipe():
    """The shell commands of the doc's MariaDB recipe block, as written there."""
    text = DOC.read_text()
    m = re.search(r"<!-- recipe:mariadb[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert m, f"no recipe block in {DOC}"
    lines = m.group(1).splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines) + "\n"


def _client_dir(server, tmp_path):
    """A directory with a `mariadb` that reaches `server`: the user's own connection defaults."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("mariadb", "mariadb-dump"):
        wrapper = bin_dir / tool
        wrapper.write_text(f"#!/bin/sh\nexec {_tool(tool)} --socket={server.socket} --user=root \"$@\"\n")
        wrapper.chmod(0o755)
    return bin_dir


def _shell(script, cwd, bin_dir):
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _consume(conn, table, columns="*"):
    """Every row of `table`, one queue_wait() each, in the order they are handed out."""
    got = []
    while True:
        rows = query(conn, f"SELECT {columns} FROM {table} WHERE queue_wait('{table}', 0)")
        if not rows:
            return got
        assert len(rows) == 1, rows
        got.append(rows[0])


def _dt(*a):
    return datetime.datetime(*a)


def _utc(*a):
    return calendar.timegm(datetime.datetime(*a).timetuple())


MYSQL80_QUEUES = {
    "app.jobs": ("*", [
        (42, 5, "Resize", '{"w": 800, "h": 600}', "first", _dt(2024, 5, 1, 10, 0, 0), b"PNG\x00\r\n\x1a"),
        (7, 1, "mail", '{"to": "a@example.com"}', "it's \"quoted\"\nline 2\\end", _dt(2024, 5, 1, 10, 0, 1), None),
        (1001, 9, "resize", None, "Grüße, 日本, 😀", _dt(2024, 5, 1, 10, 0, 2), b""),
        (3, 0, "Mail", "{}", None, _dt(2024, 5, 1, 10, 0, 3), None),
        (3, 0, "Mail", "{}", None, _dt(2024, 5, 1, 10, 0, 3), None),
        (18446744073709551615, -128, "edge", "[]", "", _dt(1970, 1, 1, 0, 0, 1), b"\x00"),
    ]),
    "app.mails": ("*", [
        ("c@example.com", "third in id order, first in the queue"),
        ("a@example.com", "second"),
        ("b@example.com", None),
    ]),
}

MYSQL57_QUEUES = {
    "app.events": ("user_id, kind, amount, UNIX_TIMESTAMP(at), note, raw", [
        (17, "purchase", Decimal("19.99"), _utc(2023, 11, 5, 8, 30, 0), "Grüße 😀", b"\xca\xfe\x00\xba\xbe"),
        (3, "signup", None, _utc(2023, 11, 5, 8, 29, 59), None, None),
        (17, "login", None, _utc(2023, 11, 5, 8, 31, 0), "it's", b""),
        (9, "purchase", Decimal("0.01"), 1, "\\n is not a newline", None),
    ]),
}


@pytest.mark.parametrize("dump,queues", [("q4m-mysql57-dump.sql", MYSQL57_QUEUES),
                                         ("q4m-mysql80-dump.sql", MYSQL80_QUEUES)],
                         ids=["mysql57", "mysql80"])
def test_the_migration_recipe_moves_a_mysql_dump_in_order(server, tmp_path, dump, queues):
    bin_dir = _client_dir(server, tmp_path)
    (tmp_path / "q4m-dump.sql").write_bytes((FIXTURES / dump).read_bytes())
    if dump == "q4m-mysql80-dump.sql":  # what the recipe's sed takes out, and why
        raw = _shell("mariadb < q4m-dump.sql", tmp_path, bin_dir)
        assert raw.returncode != 0 and "ERROR 1193" in raw.stderr and "GTID_PURGED" in raw.stderr, raw.stderr
        no_gtid = _shell("sed -e '/^SET @@GLOBAL.GTID_PURGED=/,/;$/d' q4m-dump.sql | mariadb", tmp_path, bin_dir)
        assert no_gtid.returncode != 0 and "ERROR 1273" in no_gtid.stderr, no_gtid.stderr
        assert "utf8mb4_0900_ai_ci" in no_gtid.stderr

    done = _shell(_recipe(), tmp_path, bin_dir)
    assert done.returncode == 0, done.stderr
    counts = sorted(tuple(line.split("\t")) for line in done.stdout.splitlines() if line.startswith("app\t"))
    assert counts == sorted(("app", t.split(".")[1], str(len(rows))) for t, (_, rows) in queues.items()), done.stdout

    c = server.connect()
    for table, (columns, rows) in queues.items():
        assert _consume(c, table, columns) == rows, table  # the last wait ended the last row
        assert server.value(f"SELECT COUNT(*) FROM {table}") == 0
    if dump == "q4m-mysql80-dump.sql":
        collations = server.sql("SELECT TABLE_NAME, COLUMN_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                                "WHERE TABLE_SCHEMA='app' AND COLUMN_NAME IN ('body', 'kind', 'subject') ORDER BY 1, 2")
        assert collations == [("jobs", "body", "utf8mb4_uca1400_nopad_ai_ci"),
                              ("jobs", "kind", "utf8mb4_uca1400_nopad_as_cs"),
                              ("mails", "subject", "utf8mb4_nopad_bin")], collations
        assert server.value("SELECT value FROM app.settings WHERE name='workers'") == "4"  # InnoDB too


@pytest.mark.parametrize("options", ["", "--single-transaction"], ids=["lock-tables", "single-transaction"])
def test_mariadb_dump_keeps_the_queue_order_elsewhere(server, server_factory, tmp_path, options):
    """A dump keeps every row in queue order, the rows in flight too (owned by a consumer, held
    by an open transaction's end): they are not consumed yet, and a restore hands them out
    again, as a restart does. (They were left out before: a restore lost them.)"""
    server.sql("CREATE TABLE test.outq (id INT NOT NULL, body VARBINARY(8)) ENGINE=QUEUE")
    server.sql("INSERT INTO test.outq VALUES (50, 'a'), (10, 'b'), (40, x'00ff'), (20, NULL), (60, 'e'), (30, '')")
    consumer = server.connect()
    assert value(consumer, "SELECT queue_wait('outq', 0)") == 1
    assert value(consumer, "SELECT queue_wait('outq', 0)") == 1  # ends 50, takes 10
    assert value(consumer, "SELECT queue_end()") == 1
    retried = server.connect()
    assert query(retried, "SELECT id FROM outq WHERE queue_wait('outq', 0)") == [(40,)]
    assert value(retried, "SELECT queue_abort()") == 1  # back in its place, first
    holder = server.connect()
    assert query(holder, "SELECT id FROM outq WHERE queue_wait('outq:id = 60', 0)") == [(60,)]
    ender = server.connect()
    if options == "--single-transaction":  # (LOCK TABLES ... READ would wait for this transaction's end)
        query(ender, "BEGIN")
        assert query(ender, "SELECT id FROM outq WHERE queue_wait('outq:id = 30', 0)") == [(30,)]
        assert value(ender, "SELECT queue_end()") == 1  # held by the open transaction
        assert [r[0] for r in server.sql("SELECT id FROM test.outq")] == [40, 20]  # others do not see them

    dumped = _shell(f"mariadb-dump {options} --hex-blob test outq > q.sql", tmp_path, _client_dir(server, tmp_path))
    assert dumped.returncode == 0, dumped.stderr
    assert "ENGINE=QUEUE" in (tmp_path / "q.sql").read_text()
    other = server_factory.new()
    try:
        other_bin = tmp_path / "other"
        other_bin.mkdir()
        loaded = _shell("mariadb test < q.sql", tmp_path, _client_dir(other, other_bin))
        assert loaded.returncode == 0, loaded.stderr
        expected = [(40, b"\x00\xff"), (20, None), (60, b"e"), (30, b"")]
        assert _consume(other.connect(), "outq", "id, body") == expected
    finally:
        other.destroy()
    if options:
        query(ender, "ROLLBACK")
    assert value(holder, "SELECT queue_abort()") == 1
    assert [r[0] for r in server.sql("SELECT id FROM test.outq")] == [40, 20, 60, 30]  # row id order
