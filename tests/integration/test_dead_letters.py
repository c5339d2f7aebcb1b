"""MAX_DELIVERIES: a row handed out that many times that comes back to the queue (an abort, a
disconnect, an expired lease) is dead. It stays in the table, visible to SELECT and DELETE,
counted in DEAD_ROWS, and only queue_take_dead() hands it out: a dead-letter queue inside the
table, so that no crash can lose or duplicate the move."""
import json

from sqlcheck import expect_error, query, value, wait_until


def _jobs(server, max_deliveries=2, rows=("poison", "fine")):
    server.sql(f"CREATE TABLE test.jobs (id INT, msg TEXT) ENGINE=QUEUE MAX_DELIVERIES={max_deliveries}")
    server.sql("INSERT INTO test.jobs VALUES " + ", ".join(f"({i + 1}, '{m}')" for i, m in enumerate(rows)))


def _dead(server):
    return server.value("SELECT DEAD_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'")


def _fail_once(server, expect_id=1):
    """A worker takes the first row and fails on it (queue_abort)."""
    c = server.connect()
    assert query(c, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(expect_id,)]
    assert value(c, "SELECT queue_abort()") == 1
    c.close()


def test_a_poison_message_dies_and_the_queue_goes_on(server):
    _jobs(server)
    _fail_once(server)
    assert _dead(server) == 0
    _fail_once(server)
    assert _dead(server) == 1
    worker = server.connect()
    assert query(worker, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(2,)]  # the poison is skipped
    assert value(worker, "SELECT queue_end()") == 1
    assert value(worker, "SELECT queue_wait('jobs', 0)") == 0
    assert value(worker, "SELECT queue_end()") == 1  # (owner mode owning no row, as Q4M: left)
    assert query(worker, "SELECT id, msg FROM jobs") == [(1, "poison")]  # still there, visible
    stats = json.loads(server.value("SELECT queue_stats('test.jobs')"))
    assert (stats["rows"], stats["dead_rows"]) == (1, 1)


def test_queue_take_dead_inspects_purges_and_redrives(server):
    _jobs(server, rows=("poison", "also poison"))
    for expect_id in (1, 1, 2, 2):
        _fail_once(server, expect_id)
    assert _dead(server) == 2
    admin = server.connect()
    assert query(admin, "SELECT id, msg FROM jobs WHERE queue_take_dead('jobs')") == [(1, "poison")]
    assert value(admin, "SELECT queue_delivery_count()") == 3
    # Redrive: a fresh copy goes back to the queue, the dead one is removed.
    query(admin, "INSERT INTO jobs SELECT * FROM jobs")
    assert value(admin, "SELECT queue_end()") == 1
    # Purge: each queue_take_dead() ends the dead row taken before.
    assert query(admin, "SELECT id FROM jobs WHERE queue_take_dead('jobs')") == [(2,)]
    assert value(admin, "SELECT queue_take_dead('jobs')") == 0  # removed row 2; none left
    assert _dead(server) == 0
    worker = server.connect()
    assert query(worker, "SELECT id, msg FROM jobs WHERE queue_wait('jobs', 0)") == [(1, "poison")]
    assert value(worker, "SELECT queue_delivery_count()") == 1  # the copy starts over


def test_a_disconnect_and_an_expired_lease_count_as_failed_deliveries(server):
    _jobs(server, max_deliveries=2, rows=("crashes the worker",))
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.jobs', 0)") == 1
    c.close()  # the worker died holding it
    wait_until(lambda: server.value("SELECT OWNED_ROWS FROM information_schema.QUEUE_TABLES "
                                    "WHERE TABLE_NAME='jobs'") == 0, what="the row to come back")
    hung = server.connect()
    query(hung, "SET SESSION queue_lease_timeout = 0.2")
    assert value(hung, "SELECT queue_wait('test.jobs', 0)") == 1
    wait_until(lambda: _dead(server) == 1, what="the lease to run out and the row to die")
    assert value(server.connect(), "SELECT queue_wait('test.jobs', 0)") == 0


def test_a_retry_delay_does_not_hold_back_a_dying_row(server):
    _jobs(server, max_deliveries=1, rows=("poison",))
    c = server.connect()
    assert value(c, "SELECT queue_wait('test.jobs', 0)") == 1
    assert value(c, "SELECT queue_abort(3600)") == 1
    assert _dead(server) == 1
    assert server.value("SELECT DELAYED_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'") == 0


def test_alter_changes_the_limit_in_place_and_revives_rows(server):
    _jobs(server, max_deliveries=1, rows=("poison",))
    _fail_once(server)
    assert _dead(server) == 1
    waiter = server.connect()
    next_rowid_before = server.value("SELECT NEXT_ROWID FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'")
    server.sql("ALTER TABLE test.jobs MAX_DELIVERIES=5")
    assert _dead(server) == 0
    assert query(waiter, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(1,)]
    assert value(waiter, "SELECT queue_delivery_count()") == 2  # an in-place ALTER keeps the counts
    assert value(waiter, "SELECT queue_abort()") == 1
    server.sql("ALTER TABLE test.jobs MAX_DELIVERIES=2")  # lower: the queued row at 2 dies
    assert _dead(server) == 1
    # In place: the ids go on as they were (a copying ALTER keeps them too: test_alter_ownership.py).
    assert server.value("SELECT NEXT_ROWID FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME='jobs'") \
        == next_rowid_before
    server.sql("ALTER TABLE test.jobs MAX_DELIVERIES=0")
    assert _dead(server) == 0


def test_dead_rows_stay_dead_after_kill_9(server):
    _jobs(server, max_deliveries=2)
    _fail_once(server)
    _fail_once(server)
    assert _dead(server) == 1
    server.restart(kill=True)
    assert _dead(server) == 1
    worker = server.connect()
    assert query(worker, "SELECT id FROM jobs WHERE queue_wait('jobs', 0)") == [(2,)]
    assert value(worker, "SELECT queue_end()") == 1
    assert query(worker, "SELECT id FROM jobs WHERE queue_take_dead('jobs')") == [(1,)]


def test_bad_options_and_arguments_are_refused(server):
    expect_error(server.connect(), "CREATE TABLE test.j (v INT) ENGINE=QUEUE MAX_DELIVERIES='lots'",
                 "QUEUE table 'test.j'", "MAX_DELIVERIES: 'lots' is not a whole number of deliveries", code=1478)
    expect_error(server.connect(), "CREATE TABLE test.j (v INT) ENGINE=QUEUE MAX_DELIVERIES=70000",
                 "MAX_DELIVERIES")
    _jobs(server)
    c = server.connect()
    expect_error(c, "SELECT queue_take_dead(NULL)", "queue_take_dead(): argument 1: table name is NULL")
    expect_error(c, "SELECT queue_take_dead('nosuch')", "queue_take_dead()", "nosuch")
    expect_error(c, "SELECT queue_take_dead('jobs:id=1')", "queue_take_dead()", "condition")
    expect_error(c, "SELECT queue_take_dead()", "queue_take_dead() takes 1 argument")
    expect_error(c, "SELECT queue_take_dead('jobs', 1)", "queue_take_dead() takes 1 argument")


def test_truncate_empties_the_dead_letters_too(server):
    _jobs(server, max_deliveries=1)
    _fail_once(server)
    assert _dead(server) == 1
    server.sql("TRUNCATE TABLE test.jobs")
    assert _dead(server) == 0  # the count once outlived the rows TRUNCATE removed
    assert value(server.connect(), "SELECT queue_take_dead('test.jobs')") == 0
