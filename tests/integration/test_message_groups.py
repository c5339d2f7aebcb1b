"""MESSAGE_GROUP_COLUMN: rows with the same value in that column (a customer, an order, an
account) are handed out one at a time, in insert order, as SQS FIFO queues do per
MessageGroupId. Other groups, and rows whose column is NULL, are not held up."""
import json

from sqlcheck import expect_error, query, start_waiter, value, wait_until

from binlog_modes import both_binlog_modes

# Behaviour that can differ with the binary log on (two-phase statements): both modes (issue 40).
pytestmark = both_binlog_modes


def _jobs(server, rows):
    server.sql("CREATE TABLE test.jobs (id INT, customer VARCHAR(20), msg TEXT) "
               "ENGINE=QUEUE MESSAGE_GROUP_COLUMN='customer'")
    _insert(server, rows)


def _insert(server, rows):
    server.sql("INSERT INTO test.jobs VALUES " + ", ".join(
        f"({i}, {'NULL' if c is None else repr(c)}, 'job {i}')" for i, c in rows))


def _take(c, timeout=0):
    """The id of the row connection c takes now, None if none."""
    rows = query(c, f"SELECT id FROM jobs WHERE queue_wait('jobs', {timeout})")
    return rows[0][0] if rows else None


def _groups(server):
    return server.value("SELECT MESSAGE_GROUPS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'")


def test_one_row_per_customer_at_a_time_in_order(server):
    _jobs(server, [(1, "alice"), (2, "alice"), (3, "bob"), (4, None), (5, "alice"), (6, "bob")])
    assert _groups(server) == 2
    w1, w2, w3, w4 = (server.connect() for _ in range(4))
    assert _take(w1) == 1
    assert _take(w2) == 3       # alice's 2 waits for 1
    assert _take(w3) == 4       # no group: goes at once
    assert value(w3, "SELECT queue_end()") == 1
    assert _take(w4) is None    # alice's 2 and bob's 6 wait
    assert value(w1, "SELECT queue_end()") == 1
    assert _take(w4) == 2
    assert value(w2, "SELECT queue_abort()") == 1  # bob's 3 failed: it goes again before 6
    assert _take(w2) == 3
    assert value(w2, "SELECT queue_end()") == 1
    assert _take(w2) == 6
    stats = json.loads(server.value("SELECT queue_stats('test.jobs')"))
    assert stats["message_groups"] == 2


def test_a_waiting_consumer_gets_the_next_row_when_the_one_ahead_ends(server):
    _jobs(server, [(1, "alice"), (2, "alice")])
    w1 = server.connect()
    assert _take(w1) == 1
    w2, bg = start_waiter(server, "SELECT queue_wait('test.jobs', 30)")
    assert value(w1, "SELECT queue_end()") == 1
    assert bg.join() == 1
    assert query(w2, "SELECT id FROM jobs") == [(2,)]


def test_a_disconnect_gives_the_row_back_at_the_head_of_its_group(server):
    _jobs(server, [(1, "alice"), (2, "alice")])
    w1 = server.connect()
    assert _take(w1) == 1
    w1.close()
    w2 = server.connect()
    wait_until(lambda: _take(w2) is not None, what="row 1 to come back")
    assert query(w2, "SELECT id FROM jobs") == [(1,)]


def test_order_holds_across_a_kill_9(server):
    _jobs(server, [(1, "alice"), (2, "alice"), (3, "alice"), (4, "bob")])
    w = server.connect()
    assert _take(w) == 1
    assert value(w, "SELECT queue_end()") == 1
    assert _take(w) == 2   # owned when the server dies
    server.restart(kill=True)
    w1, w2, w3 = (server.connect() for _ in range(3))
    assert _take(w1) == 2  # back, and still ahead of 3
    assert _take(w2) == 4
    assert _take(w3) is None
    assert value(w1, "SELECT queue_end()") == 1
    assert _take(w3) == 3


def test_the_option_can_be_added_and_dropped_by_alter(server):
    server.sql("CREATE TABLE test.jobs (id INT, customer INT) ENGINE=QUEUE")
    server.sql("INSERT INTO test.jobs VALUES (1, 7), (2, 7), (3, 8)")
    server.sql("ALTER TABLE test.jobs MESSAGE_GROUP_COLUMN='customer'")
    assert _groups(server) == 2
    w1, w2, w3 = (server.connect() for _ in range(3))
    assert _take(w1) == 1
    assert _take(w2) == 3
    assert _take(w3) is None
    for c in (w1, w2):
        assert value(c, "SELECT queue_abort()") == 1
    server.sql("ALTER TABLE test.jobs MESSAGE_GROUP_COLUMN=''")
    assert _groups(server) == 0
    assert sorted(_take(c) for c in (w1, w2, w3)) == [1, 2, 3]


def test_bad_group_columns_are_refused(server):
    c = server.connect()
    expect_error(c, "CREATE TABLE test.j (v INT) ENGINE=QUEUE MESSAGE_GROUP_COLUMN='nope'",
                 "QUEUE table 'test.j'", "MESSAGE_GROUP_COLUMN: the table has no column `nope`", code=1478)
    expect_error(c, "CREATE TABLE test.j (v INT, k TEXT) ENGINE=QUEUE MESSAGE_GROUP_COLUMN='k'",
                 "MESSAGE_GROUP_COLUMN: column `k` is text", "a group key must be")
    expect_error(c, "CREATE TABLE test.j (v INT, k DOUBLE) ENGINE=QUEUE MESSAGE_GROUP_COLUMN='k'",
                 "MESSAGE_GROUP_COLUMN: column `k` is double")
    server.sql("CREATE TABLE test.j (v INT, k INT) ENGINE=QUEUE MESSAGE_GROUP_COLUMN='k'")
    expect_error(c, "ALTER TABLE test.j DROP COLUMN k", "MESSAGE_GROUP_COLUMN: the table has no column `k`")
    expect_error(c, "ALTER TABLE test.j MODIFY k VARCHAR(5) COMPRESSED",
                 "MESSAGE_GROUP_COLUMN: column `k` is varchar(5) /*M!100301 COMPRESSED*/", code=1478)


def test_a_batch_takes_one_row_per_group_and_a_condition_never_jumps_ahead(server):
    _jobs(server, [(1, "alice"), (2, "alice"), (3, "bob"), (4, "bob"), (5, None), (6, "carol")])
    w = server.connect()
    assert value(w, "SELECT queue_wait_batch('jobs', 10, 0)") == 4
    assert sorted(r[0] for r in query(w, "SELECT id FROM jobs")) == [1, 3, 5, 6]
    picky = server.connect()
    assert _take_where(picky, "id = 2") is None  # alice's next row, but 1 is out
    assert value(w, "SELECT queue_end()") == 1
    assert _take_where(picky, "id = 4") == 4
    assert _take_where(server.connect(), "id = 2") == 2


def _take_where(c, condition):
    rows = query(c, f"SELECT id FROM jobs WHERE queue_wait('jobs:{condition}', 0)")
    return rows[0][0] if rows else None


def _group_count_for(server, column_type, values):
    server.sql("DROP TABLE IF EXISTS test.jobs")
    server.sql(f"CREATE TABLE test.jobs (id INT, customer {column_type}) ENGINE=QUEUE "
               "MESSAGE_GROUP_COLUMN='customer'")
    server.sql("INSERT INTO test.jobs VALUES " + ", ".join(f"({i}, {v!r})" for i, v in enumerate(values, 1)))
    return _groups(server)


def test_values_the_collation_calls_equal_are_one_group(server):
    """'alice', 'ALICE' and 'alice ' are one customer under a case-insensitive PAD SPACE
    collation (as for GROUP BY and a unique key), and stay one group after a kill -9."""
    values = ["alice", "ALICE", "alice ", "Alice"]
    assert _group_count_for(server, "VARCHAR(20) COLLATE utf8mb4_general_ci", values) == 1
    assert server.value("SELECT COUNT(DISTINCT customer) FROM test.jobs") == 1  # SQL agrees
    assert _group_count_for(server, "CHAR(10) COLLATE utf8mb4_unicode_ci", values) == 1
    assert _group_count_for(server, "VARCHAR(20) COLLATE utf8mb4_bin", values) == 3    # 'alice' = 'alice '
    assert _group_count_for(server, "VARCHAR(20) COLLATE utf8mb4_nopad_bin", values) == 4
    assert _group_count_for(server, "VARBINARY(20)", values) == 4
    assert _group_count_for(server, "VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_swedish_ci", values) == 1
    # A character that weighs as two: 'straße' = 'STRASSE' under utf8mb4_unicode_ci.
    streets = ["straße", "STRASSE", "strasse ", "strase"]
    assert _group_count_for(server, "VARCHAR(20) COLLATE utf8mb4_unicode_ci", streets) == 2
    assert server.value("SELECT COUNT(DISTINCT customer) FROM test.jobs") == 2

    _group_count_for(server, "VARCHAR(20) COLLATE utf8mb4_general_ci", values)
    w1, w2 = server.connect(), server.connect()
    assert _take(w1) == 1
    assert _take(w2) is None  # 'ALICE' is alice: it waits for row 1
    server.restart(kill=True)
    assert _groups(server) == 1  # found again from the rows, under the same collation
    w1, w2 = server.connect(), server.connect()
    assert _take(w1) == 1
    assert _take(w2) is None
    assert value(w1, "SELECT queue_end()") == 1
    assert _take(w2) == 2


def test_a_row_back_from_the_dead_waits_for_the_row_of_its_group_that_is_out(server):
    """Raising MAX_DELIVERIES puts a dead row back at the head of its group; if a later row
    of the group is out at that moment, the dead row waits for it: never two rows out."""
    server.sql("CREATE TABLE test.jobs (id INT, customer VARCHAR(20), msg TEXT) ENGINE=QUEUE "
               "MESSAGE_GROUP_COLUMN='customer' MAX_DELIVERIES=1")
    _insert(server, [(1, "alice"), (2, "alice"), (3, "alice")])
    w1, w2 = server.connect(), server.connect()
    assert _take(w1) == 1
    assert value(w1, "SELECT queue_abort()") == 1  # dead at its first failure
    assert _take(w1) == 2
    server.sql("ALTER TABLE test.jobs MAX_DELIVERIES=5")
    assert server.value("SELECT DEAD_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'") == 0
    assert _take(w2) is None  # row 1 is back, but row 2 is out
    assert value(w1, "SELECT queue_end()") == 1
    assert _take(w2) == 1
    assert _take(w1) is None  # row 3 waits for row 1
    assert value(w2, "SELECT queue_end()") == 1
    assert _take(w1) == 3


def test_a_compressed_column_is_refused(server):
    expect_error(server.connect(), "CREATE TABLE test.j (v INT, k VARCHAR(20) COMPRESSED) ENGINE=QUEUE "
                 "MESSAGE_GROUP_COLUMN='k'", "QUEUE table 'test.j'", "MESSAGE_GROUP_COLUMN: column `k` is",
                 "not COMPRESSED", code=1478)


def test_binary_types_stored_as_char_compare_byte_for_byte(server):
    """INET6 and UUID are stored like CHAR but hold bytes: '::41' and '::61' differ only in
    one byte's case bit, and must stay two groups."""
    assert _group_count_for(server, "INET6", ["::41", "::61", "::41"]) == 2
    assert _group_count_for(server, "UUID", ["00000000-0000-0000-0000-000000000041",
                                             "00000000-0000-0000-0000-000000000061"]) == 2
    assert _group_count_for(server, "BINARY(2)", ["a", "A", "a"]) == 2
