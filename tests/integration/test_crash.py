"""Crash test: producers and consumers run against the server, which is killed (-9) mid-load,
restarted and drained, Q4M_CRASH_CYCLES times (default 20) per sync mode. Every fourth row is
inserted with a delay (VISIBLE_AT_COLUMN, 150 ms) and consumers sometimes give rows back with
a delay (queue_abort(0.3)), so delayed rows are among those the kill must not lose.

Each message is identified by (producer, seq) and carries a payload derived from it. Definitions:
  attempted   an INSERT carrying the id was sent;
  inserted    that INSERT returned OK;
  acked       queue_end() (or, in the one-statement style, the next queue_wait()) that removes the
              row returned OK;
  ack_unknown an ack was sent but the server died before answering (the row may or may not remain;
              counted per sender, see AcksInFlight);
  remaining   the rows in the table after the restart.
Checks, after every restart:
  - none lost:       inserted - acked - ack_unknown is contained in remaining;
  - no duplicates:   no id is acked twice, no id appears twice in remaining,
                     no id is both acked and remaining;
  - nothing invented: remaining is contained in attempted, and every payload is intact;
and while the server runs: a consumer that owns a row sees exactly that row, no id is handed to
two owners at once, and no id is handed out after it was acked. With MESSAGE_GROUP_COLUMN (each
producer's rows fall into 8 groups by seq), no row is handed out while another row of its group
is out, nor before every earlier row of its group was acked (or its ack sent). Delivery counts survive the kill
too: a row drained after the restart has queue_delivery_count() of at least 1 + the number of
its queue_abort() calls that returned before the kill (checked without leases: with them, an
abort may find the lease expired and give back nothing itself).

Client connections stay open until the server is dead, even after their thread stopped: closing
a connection returns its owned row to the queue, and another consumer would then rightly receive
it, which "owned at once" cannot tell from a real double hand-out. Kept open, a consumer owns its
row until its own queue_end/queue_abort or the kill, so that check is exact.
"""
import hashlib
import json
import os
import random
import threading
import time
from collections import Counter

import pymysql
import pytest

from sqlcheck import wait_until

CYCLES = int(os.environ.get("Q4M_CRASH_CYCLES", "20"))
PRODUCERS, CONSUMERS = 3, 4
LOAD_SECONDS = (0.8, 2.0)  # random time under load before the kill
DRAIN_BY_CONSUMING = 300  # rows drained with queue_wait() after each restart; DELETE does the rest


def payload_for(mid):
    p, seq = mid
    digest = hashlib.sha1(f"{p}:{seq}".encode()).hexdigest()
    return digest * (1 + (p * 131 + seq * 7) % 60)  # 40 B .. 2.4 KB


GROUPS_PER_PRODUCER = 8


def group_of(mid):  # the grp column: each producer's rows in 8 groups, in seq order within each
    p, seq = mid
    return p * GROUPS_PER_PRODUCER + seq % GROUPS_PER_PRODUCER


class AcksInFlight:
    """Rows whose ack was sent and not yet answered, counted per sender (thread-safe). With
    leases two consumers can each have an ack of one row in flight: the first one's lease ran
    out, the row went to the second, which is ending it. The first learning that its lease
    expired withdraws its own claim only; with a plain set it withdrew the second's too, and a
    kill during the second's ack then reported the row as lost."""

    def __init__(self):
        self._lock = threading.Lock()
        self._claims = Counter()

    def add(self, mid):
        with self._lock:
            self._claims[mid] += 1

    def update(self, mids):
        for mid in mids:
            self.add(mid)

    def discard(self, mid):  # one claim
        with self._lock:
            if self._claims[mid] > 1:
                self._claims[mid] -= 1
            else:
                self._claims.pop(mid, None)

    def __contains__(self, mid):
        with self._lock:
            return self._claims.get(mid, 0) > 0

    def __len__(self):
        with self._lock:
            return len(self._claims)

    def __rsub__(self, rows):  # set - AcksInFlight
        with self._lock:
            return set(rows) - set(self._claims)


class Ledger:
    """What the clients observed during one cycle (thread-safe)."""

    def __init__(self, leases=False, batches=False, max_deliveries=0, groups=False, max_rows=0):
        # With leases a row may be handed out again while its first owner still believes it
        # holds it (it learns of the expiry at its next queue_end/queue_wait): "owned by two
        # at once" is then expected, and "acked twice" is what must never happen.
        self.leases = leases
        self.batches = batches  # half the consumers take batches (queue_wait_batch)
        self.max_deliveries = max_deliveries  # the table's MAX_DELIVERIES (0 = none)
        self.groups = groups  # the table has MESSAGE_GROUP_COLUMN='grp'
        self.max_rows = max_rows  # the table's MAX_ROWS (0 = none): INSERTs past it fail whole
        self.refused = set()  # ids of INSERTs refused with "table is full"
        self.group_rows = {}  # group -> its ids in insert order
        self.group_acked_upto = Counter()  # group -> how many of its first rows are acked
        self.grouped_deliveries = 0
        self.batched = 0  # rows seen in batches of two or more
        self.expired = 0  # queue_end/queue_wait calls told "lease expired"
        self.lock = threading.Lock()
        self.attempted, self.inserted = set(), set()
        self.acked, self.ack_unknown = set(), AcksInFlight()
        self.held = {}  # id -> consumer that owns it now
        self.returned = Counter()  # id -> its queue_abort() calls that returned
        self.history = {}  # id -> what happened to it, for the message about a lost row
        self.violations, self.errors = [], []
        self.killing = threading.Event()
        self.connections = []  # closed by close_connections(), after the kill

    def connect(self, server):
        c = server._raw_connect(read_timeout=60, write_timeout=60)
        with self.lock:
            self.connections.append(c)
        return c

    def close_connections(self):
        for c in self.connections:
            try:
                c.close()
            except CLIENT_ERRORS:
                pass  # the server is gone; the socket is closed all the same

    def deliver(self, mid, who):
        with self.lock:
            # With leases the order in which the client threads record what they saw is not the
            # server's: consumer A reads its batch, its lease runs out, B takes and acks a row of
            # it, and only then does A's thread get to record the row. Then the exact check is
            # the one below: A's queue_end() fails, and an ack of A's would be "acked twice".
            if mid in self.refused:
                self.violations.append(f"{mid} handed to consumer {who}, but its INSERT was refused")
            if mid in self.acked and not self.leases:
                self.violations.append(f"{mid} handed to consumer {who} after it was acked "
                                       f"(history: {self.history.get(mid, [])})")
            if self.max_deliveries and self.returned[mid] >= self.max_deliveries:
                self.violations.append(f"{mid} handed to consumer {who} after it died (MAX_DELIVERIES="
                                       f"{self.max_deliveries}; history: {self.history.get(mid, [])})")
            if mid in self.held and not self.leases:
                self.violations.append(f"{mid} owned by consumers {self.held[mid]} and {who} at once "
                                       f"(history: {self.history.get(mid, [])})")
            if self.groups:
                self._check_group_order(mid, who)
            self.held[mid] = who
            self.history.setdefault(mid, []).append(f"to {who}")

    def refuse(self, mids):  # the INSERT failed with error 1114: none of its rows may ever show
        with self.lock:
            self.refused.update(mids)
            for mid in mids:
                self.group_rows[group_of(mid)].remove(mid)

    def attempt(self, mids):
        with self.lock:
            self.attempted.update(mids)
            for mid in mids:
                self.group_rows.setdefault(group_of(mid), []).append(mid)

    def _check_group_order(self, mid, who):  # self.lock held
        g = group_of(mid)
        self.grouped_deliveries += 1
        for other, owner in self.held.items():
            if other != mid and group_of(other) == g and other not in self.ack_unknown:
                self.violations.append(f"{mid} handed to consumer {who} while {other} of group {g} is out "
                                       f"(owned by {owner})")
        rows, done = self.group_rows.get(g, []), self.group_acked_upto[g]
        while done < len(rows) and rows[done] in self.acked:
            done += 1
        self.group_acked_upto[g] = done
        for earlier in rows[done:]:
            if earlier == mid:
                break
            if earlier not in self.acked and earlier not in self.ack_unknown:  # (another ack may still be unrecorded)
                self.violations.append(f"{mid} handed to consumer {who} before {earlier} of group {g} was acked "
                                       f"(history: {self.history.get(earlier, [])})")

    def release(self, mid):  # before queue_abort: the row becomes free once the abort runs
        with self.lock:
            self.held.pop(mid, None)
            self.history.setdefault(mid, []).append("aborted")

    def aborted(self, mids):  # queue_abort() returned: each row's count is on disk (RETURN record)
        with self.lock:
            self.returned.update(mids)

    def ack(self, mid):
        with self.lock:
            if mid in self.acked:
                self.violations.append(f"{mid} acked twice (history: {self.history.get(mid, [])})")
            self.acked.add(mid)
            self.held.pop(mid, None)
            self.history.setdefault(mid, []).append("acked")

    def lease_expired(self, mid):  # its ack failed: the row went back, it was not removed
        with self.lock:
            self.ack_unknown.discard(mid)
            self.expired += 1
            self.history.setdefault(mid, []).append("an owner's lease expired")

    def failed(self, who, e):
        if not self.killing.is_set():
            with self.lock:
                self.errors.append(f"{who}: {e!r}")


CLIENT_ERRORS = (pymysql.MySQLError, OSError)
ER_LOCK_WAIT_TIMEOUT = 1205  # what q4m answers when the owned row's lease ran out
ER_RECORD_FILE_FULL = 1114  # an INSERT past MAX_ROWS
LEASE_S = 0.03  # the lease-mode consumers' queue_lease_timeout; their slow jobs take 0.06 s
BATCH_ROWS = 20  # batch consumers ask for 1..BATCH_ROWS rows


def lease_ran_out(e):
    return isinstance(e, pymysql.MySQLError) and e.args and e.args[0] == ER_LOCK_WAIT_TIMEOUT


def producer(server, ledger, pid):
    try:
        c = ledger.connect(server)
        cur = c.cursor()
        seq = 0
        while not ledger.killing.is_set():
            ids = [(pid, seq + k) for k in range(3 if seq % 5 == 0 else 1)]
            ledger.attempt(ids)
            # Every fourth row is not handed out before 150 ms from now (VISIBLE_AT_COLUMN).
            try:
                cur.execute("INSERT INTO q (producer, seq, payload, due, grp) VALUES "
                            + ", ".join(["(%s, %s, %s, NOW(3) + INTERVAL %s SECOND, %s)"] * len(ids)),
                            [x for mid in ids for x in (mid[0], mid[1], payload_for(mid),
                                                        0.15 if mid[1] % 4 == 0 else None, group_of(mid))])
            except pymysql.MySQLError as e:
                if not (ledger.max_rows and e.args and e.args[0] == ER_RECORD_FILE_FULL):
                    raise
                ledger.refuse(ids)
                seq += len(ids)
                time.sleep(0.005)  # back-pressure: give the consumers a moment
                continue
            with ledger.lock:
                ledger.inserted.update(ids)
            seq += len(ids)
    except CLIENT_ERRORS as e:
        ledger.failed(f"producer {pid}", e)


def _owned_row(ledger, cur, who):
    rows = cur.fetchall()
    if not rows and ledger.leases:
        return None  # its lease ran out between queue_wait() and this SELECT (a stalled client)
    if len(rows) != 1:
        ledger.violations.append(f"consumer {who} owning a row sees {len(rows)} rows")
        return None
    p, seq, payload = rows[0]
    mid = (p, seq)
    if payload != payload_for(mid):
        ledger.violations.append(f"{mid}: payload corrupted")
    ledger.deliver(mid, who)
    return mid


def consumer(server, ledger, who, rng):
    one_statement = who % 2 == 1

    def work():  # with leases, now and then longer than the lease
        if ledger.leases and rng.random() < 0.1:
            time.sleep(2 * LEASE_S)

    try:
        c = ledger.connect(server)
        cur = c.cursor()
        if ledger.leases:
            cur.execute(f"SET SESSION queue_lease_timeout = {LEASE_S}")
        previous = None  # one-statement style: the row the next queue_wait() consumes
        while not ledger.killing.is_set():
            if one_statement:
                if previous:
                    ledger.ack_unknown.add(previous)
                    work()
                try:
                    cur.execute("SELECT producer, seq, payload FROM q WHERE queue_wait('q', 0.5)")
                except pymysql.MySQLError as e:
                    # (previous may be None: the lease of the row it took ran out before the
                    # statement read it, on a loaded machine with a 30 ms lease (every statement
                    # waiting for the binary log's sync): it was never handed out, and this
                    # call's end of it finds it expired; as in batch_consumer.)
                    if not ((previous or ledger.leases) and lease_ran_out(e)):
                        raise
                    ledger.lease_expired(previous)
                    previous = None
                    continue
                if previous:
                    ledger.ack_unknown.discard(previous)
                    ledger.ack(previous)
                    previous = None
                if cur.rowcount:
                    previous = _owned_row(ledger, cur, who)
                else:
                    cur.fetchall()
                continue
            cur.execute("SELECT queue_wait('q', 0.5)")
            if cur.fetchone()[0] == 0:
                continue
            cur.execute("SELECT producer, seq, payload FROM q")
            mid = _owned_row(ledger, cur, who)
            if mid is None:
                if ledger.leases:  # the row is back in the queue; leave owner mode (no error after expiry)
                    cur.execute("SELECT queue_abort()")
                    cur.fetchall()
                continue
            end_or_abort(ledger, cur, who, rng, [mid], work)
    except CLIENT_ERRORS as e:
        ledger.failed(f"consumer {who}", e)


def end_or_abort(ledger, cur, who, rng, mids, work=None):
    """Two-statement style, after the SELECT of the owned rows `mids`: queue_abort() 5 % of the
    time (half of them with a delay: the rows come back later, or after the restart), else
    work() and queue_end(), whose lease may have run out meanwhile."""
    if rng.random() < 0.05:
        for mid in mids:
            ledger.release(mid)
        cur.execute("SELECT queue_abort(0.3)" if rng.random() < 0.5 else "SELECT queue_abort()")
        # With leases a row's lease may have run out just before: the abort then returns 1 but
        # gives back nothing, and the reaper's RETURN record may still be unwritten at the kill.
        if not ledger.leases:
            ledger.aborted(mids)
    else:
        if work:
            work()
        ledger.ack_unknown.update(mids)
        try:
            cur.execute("SELECT queue_end()")
        except pymysql.MySQLError as e:
            if not lease_ran_out(e):
                raise
            for mid in mids:
                ledger.lease_expired(mid)
            return
        for mid in mids:
            ledger.ack_unknown.discard(mid)
            ledger.ack(mid)
    if cur.fetchone()[0] != 1:
        ledger.violations.append(f"consumer {who}: queue_end/abort did not return 1")


def batch_consumer(server, ledger, who, rng):
    """Takes up to BATCH_ROWS rows at once with queue_wait_batch(): in one statement (the next
    call acks the previous batch) or as wait, SELECT, queue_end/queue_abort of the whole batch."""
    one_statement = who % 2 == 1
    try:
        c = ledger.connect(server)
        cur = c.cursor()
        if ledger.leases:
            cur.execute(f"SET SESSION queue_lease_timeout = {LEASE_S}")
        previous = []  # one-statement style: the batch the next call acks
        while not ledger.killing.is_set():
            n = rng.randint(1, BATCH_ROWS)
            if one_statement:
                ledger.ack_unknown.update(previous)
                try:
                    cur.execute("SELECT producer, seq, payload FROM q WHERE queue_wait_batch('q', %s, 0.5)", (n,))
                except pymysql.MySQLError as e:
                    # (previous may be empty: the leases of the batch it took ran out before
                    # the statement read its rows, on a loaded machine with a 30 ms lease: they
                    # were never handed out, and this call's end of them finds them expired.)
                    if not ((previous or ledger.leases) and lease_ran_out(e)):
                        raise
                    for mid in previous:
                        ledger.lease_expired(mid)
                    previous = []
                    continue
                for mid in previous:
                    ledger.ack_unknown.discard(mid)
                    ledger.ack(mid)
                previous = _owned_rows(ledger, cur, who, max_rows=n)
                continue
            cur.execute("SELECT queue_wait_batch('q', %s, 0.5)", (n,))
            taken = cur.fetchone()[0]
            if taken == 0:
                continue
            if not 1 <= taken <= n:
                ledger.violations.append(f"consumer {who}: queue_wait_batch(q, {n}) took {taken} rows")
            cur.execute("SELECT producer, seq, payload FROM q")
            mids = _owned_rows(ledger, cur, who, max_rows=taken, exactly=not ledger.leases)
            end_or_abort(ledger, cur, who, rng, mids)
    except CLIENT_ERRORS as e:
        ledger.failed(f"batch consumer {who}", e)


def _owned_rows(ledger, cur, who, max_rows, exactly=False):
    """The rows a batch owner sees: at most its batch (exactly it, unless a lease may have run
    out since), each delivered to it alone."""
    rows = cur.fetchall()
    if len(rows) > max_rows or (exactly and len(rows) != max_rows):
        ledger.violations.append(f"consumer {who} owning a batch of {max_rows} rows sees {len(rows)}")
    if len(rows) > 1:
        with ledger.lock:
            ledger.batched += len(rows)
    mids = []
    for p, seq, payload in rows:
        mid = (p, seq)
        if payload != payload_for(mid):
            ledger.violations.append(f"{mid}: payload corrupted")
        ledger.deliver(mid, who)
        mids.append(mid)
    return mids


def compactor(server, ledger):
    try:
        c = ledger.connect(server)
        cur = c.cursor()
        while not ledger.killing.wait(0.25):
            cur.execute("SELECT queue_compact('q')")
            cur.fetchall()
    except CLIENT_ERRORS as e:
        ledger.failed("compactor", e)


def run_cycle(server, cycle, rng, leases=False, batches=False, max_deliveries=0, groups=False, max_rows=0):
    ledger = Ledger(leases, batches, max_deliveries, groups, max_rows)
    threads = [threading.Thread(target=producer, args=(server, ledger, cycle * 100 + p)) for p in range(PRODUCERS)]
    threads += [threading.Thread(target=batch_consumer if batches and k >= CONSUMERS // 2 else consumer,
                                 args=(server, ledger, k, random.Random(rng.random())))
                for k in range(CONSUMERS)]
    threads.append(threading.Thread(target=compactor, args=(server, ledger)))
    for t in threads:
        t.daemon = True
        t.start()
    time.sleep(rng.uniform(*LOAD_SECONDS))
    ledger.status_before_kill = {r[1]: int(r[2]) for r in server.sql("SHOW ENGINE QUEUE STATUS")}
    ledger.killing.set()
    server.kill9()
    for t in threads:
        t.join(90)
        assert not t.is_alive(), "a client thread hangs after the server was killed"
    ledger.close_connections()
    return ledger


def check_after_restart(server, ledger, cycle):
    problems = list(ledger.violations) + [f"error while the server ran: {e}" for e in ledger.errors]
    rows = server.sql("SELECT producer, seq, payload FROM q")
    remaining = [(p, s) for p, s, _ in rows]
    counts = Counter(remaining)
    problems += [f"{mid} remains {n} times" for mid, n in counts.items() if n > 1]
    problems += [f"{mid} is both acked and remaining" for mid in counts if mid in ledger.acked]
    problems += [f"{mid} remains but was never inserted" for mid in counts if mid not in ledger.attempted]
    problems += [f"{mid} remains but its INSERT was refused" for mid in counts if mid in ledger.refused]
    if ledger.max_rows and len(remaining) > ledger.max_rows:
        problems.append(f"{len(remaining)} rows remain, more than MAX_ROWS={ledger.max_rows}")
    problems += [f"{(p, s)} remains with a corrupted payload" for p, s, pl in rows if pl != payload_for((p, s))]
    lost = ledger.inserted - ledger.acked - ledger.ack_unknown - set(counts)
    problems += [f"{mid} lost (inserted, not acked, not remaining; history: {ledger.history.get(mid, [])})"
                 for mid in sorted(lost)[:20]]
    assert not problems, f"cycle {cycle}: {len(problems)} problems:\n" + "\n".join(problems[:40])
    assert ledger.inserted, f"cycle {cycle}: no INSERT completed before the kill"
    # drain: consume a prefix (same rows, same order as SELECT), DELETE the rest; then empty.
    # Rows inserted with a delay just before the kill may not be due yet: wait for them first.
    wait_until(lambda: json.loads(server.value("SELECT queue_stats('test.q')"))["delayed_rows"] == 0,
               what="the delayed rows to become due")
    c = server.connect()
    dead = take_dead_rows(server, ledger, c, remaining, cycle) if ledger.max_deliveries else []
    remaining = [mid for mid in remaining if mid not in set(dead)]
    drained, undercounted, counts_checked = [], [], 0
    while len(drained) < DRAIN_BY_CONSUMING:
        got = server.sql("SELECT producer, seq, queue_delivery_count() FROM q WHERE queue_wait('q', 0)", conn=c)
        if not got:
            break
        p, seq, deliveries = got[0]
        mid = (p, seq)
        drained.append(mid)
        if ledger.returned[mid]:
            counts_checked += 1
            if deliveries < ledger.returned[mid] + 1:
                undercounted.append(f"{mid} handed out for time {deliveries} after {ledger.returned[mid]} "
                                    f"aborts had returned (history: {ledger.history.get(mid, [])})")
    assert drained == remaining[:len(drained)], f"cycle {cycle}: consuming returned other rows than SELECT"
    assert not undercounted, f"cycle {cycle}: delivery counts lost:\n" + "\n".join(undercounted[:20])
    if server.value("SELECT queue_rowid()", conn=c) is not None:
        assert server.value("SELECT queue_end()", conn=c) == 1  # stopped early, owning a row
    server.sql("DELETE FROM q")
    assert server.value("SELECT COUNT(*) FROM q") == 0
    c.close()
    return Counter(inserted=len(ledger.inserted), acked=len(ledger.acked), remaining=len(remaining),
                   inserts_in_flight=len(ledger.attempted - ledger.inserted - ledger.refused),
                   acks_in_flight=len(ledger.ack_unknown), leases_expired=ledger.expired,
                   batched=ledger.batched, delivery_counts_checked=counts_checked, dead=len(dead),
                   grouped_deliveries=ledger.grouped_deliveries, refused=len(ledger.refused))


def take_dead_rows(server, ledger, c, remaining, cycle):
    """With MAX_DELIVERIES=1, a row whose queue_abort() returned before the kill is dead after
    the restart (its RETURN record was written before the abort returned), and a dead row is
    one some consumer tried to abort. Takes them all with queue_take_dead(), each call removing
    the one before."""
    dead = []
    while True:
        got = server.sql("SELECT producer, seq FROM q WHERE queue_take_dead('q')", conn=c)
        if not got:
            break
        dead.append((got[0][0], got[0][1]))
    problems = [f"{mid} dead twice" for mid, n in Counter(dead).items() if n > 1]
    problems += [f"{mid} dead but not remaining" for mid in dead if mid not in set(remaining)]
    problems += [f"{mid} dead but never aborted (history: {ledger.history.get(mid, [])})"
                 for mid in dead if "aborted" not in ledger.history.get(mid, [])]
    problems += [f"{mid} was aborted before the kill but is not dead (history: {ledger.history.get(mid, [])})"
                 for mid in ledger.returned if mid in set(remaining) and mid not in set(dead)]
    assert not problems, f"cycle {cycle}: dead letters: {len(problems)} problems:\n" + "\n".join(problems[:40])
    return dead


def test_ledger_reports_what_it_must_and_nothing_else():
    """The bookkeeping alone (no server): a row is owned once at a time, and may be handed out
    again after its owner released it, but never after it was acked."""
    ledger = Ledger()
    ledger.deliver((1, 1), 0)
    ledger.release((1, 1))
    ledger.deliver((1, 1), 1)  # aborted by 0, then taken by 1: fine
    ledger.deliver((1, 2), 2)
    assert ledger.violations == []
    ledger.deliver((1, 1), 3)  # 1 still owns it
    ledger.ack((1, 2))
    ledger.deliver((1, 2), 0)
    ledger.ack((1, 2))
    assert ledger.violations == [
        "(1, 1) owned by consumers 1 and 3 at once (history: ['to 0', 'aborted', 'to 1'])",
        "(1, 2) handed to consumer 0 after it was acked (history: ['to 2', 'acked'])",
        "(1, 2) acked twice (history: ['to 2', 'acked', 'to 0'])"]


def test_ledger_reports_rows_of_a_group_out_together_or_out_of_order():
    """Rows (1, 0), (1, 8) and (1, 16) are one group: each may go out only once the one
    before was acked, or its ack sent."""
    ledger = Ledger(groups=True)
    ledger.attempt([(1, 0), (1, 1), (1, 8), (1, 16)])
    ledger.deliver((1, 0), 0)
    ledger.deliver((1, 1), 1)           # another group: fine
    ledger.ack_unknown.add((1, 0))      # 0's queue_end is on its way...
    ledger.deliver((1, 8), 2)           # ...so the next row may go
    ledger.ack((1, 0))
    assert ledger.violations == []
    ledger.deliver((1, 16), 3)          # (1, 8) is still out, unacked
    assert ledger.violations == [
        "(1, 16) handed to consumer 3 while (1, 8) of group 8 is out (owned by 2)",
        "(1, 16) handed to consumer 3 before (1, 8) of group 8 was acked (history: ['to 2'])"]


def test_with_leases_a_late_record_of_a_delivery_is_no_violation_but_a_second_ack_is():
    ledger = Ledger(leases=True)
    ledger.deliver((1, 1), 0)
    ledger.ack((1, 1))          # 0 acked it...
    ledger.deliver((1, 1), 1)   # ...and 1's thread records its read of it only now
    assert ledger.violations == []
    ledger.ack((1, 1))
    assert ledger.violations == ["(1, 1) acked twice (history: ['to 0', 'acked', 'to 1'])"]


def test_an_expired_lease_withdraws_only_its_own_ack_in_flight():
    """Consumer 0's lease on (1, 1) runs out and consumer 1 takes the row; both send an ack;
    0 hears that its lease expired, then the server dies before answering 1. The row may be
    gone: it is not lost. (With a set, 0's expiry cleared 1's claim too: a false "lost".)"""
    ledger = Ledger(leases=True)
    ledger.inserted.add((1, 1))
    ledger.ack_unknown.add((1, 1))  # consumer 0's queue_end
    ledger.ack_unknown.add((1, 1))  # consumer 1's queue_end
    ledger.lease_expired((1, 1))    # 0's answer
    assert (1, 1) in ledger.ack_unknown
    assert ledger.inserted - ledger.acked - ledger.ack_unknown == set()
    ledger.ack_unknown.discard((1, 1))  # had 1's ack been answered too
    assert ledger.inserted - ledger.acked - ledger.ack_unknown == {(1, 1)}


# The server's binary log is on (the suite's default: each statement a two-phase transaction);
# the first two variants run with it off too (one-phase commits), as before issue 40.
@pytest.mark.parametrize("mode,leases,batches,sync_removals,max_deliveries,groups,max_rows,binlog",
                         [("fdatasync", False, False, True, 0, False, 0, True), ("none", False, False, True, 0, False, 0, True),
                          ("fdatasync", False, False, True, 0, False, 0, False),
                          ("none", False, False, True, 0, False, 0, False),
                          ("fdatasync", True, False, True, 0, False, 0, True), ("fdatasync", False, True, True, 0, False, 0, True),
                          ("fdatasync", True, True, True, 0, False, 0, True), ("fdatasync", False, True, False, 0, False, 0, False),
                          ("fdatasync", False, False, True, 1, False, 0, True), ("fdatasync", False, False, True, 0, True, 0, True),
                          ("fdatasync", False, False, True, 0, False, 25, True)],
                         ids=["fdatasync", "none", "fdatasync-binlog-off", "none-binlog-off", "fdatasync-leases",
                              "fdatasync-batches", "fdatasync-leases-batches", "fdatasync-batches-unsynced-removals",
                              "fdatasync-dead-letters", "fdatasync-message-groups", "fdatasync-max-rows"],
                         indirect=["binlog"])
def test_kill9_under_load_loses_and_duplicates_nothing(fresh_server, mode, leases, batches, sync_removals,
                                                       max_deliveries, groups, max_rows, binlog):
    """With leases, consumers' jobs sometimes outlast a 30 ms lease: a row whose lease ran out
    must never also be acked by its first owner, and the kill must still lose nothing. With
    batches, half the consumers own up to 20 rows at once and end or abort them together.
    With queue_sync_removals=OFF, removals are written but not synced: a server crash must
    still keep every one of them. With MAX_DELIVERIES=1, every aborted row dies: none may be
    handed out again, and after the restart exactly the rows whose abort returned (and perhaps
    those whose abort was in flight) are dead. With MESSAGE_GROUP_COLUMN, rows of a group go out
one at a time and in order, before and after each kill. With MAX_ROWS=25 (a bounded queue),
    producers' INSERTs that find it full fail whole: none of their rows may ever show up, and
    the table never holds more than 25 rows, before or after a kill."""
    s = fresh_server
    s.sql("CREATE TABLE test.q (producer INT NOT NULL, seq INT NOT NULL, payload TEXT, due TIMESTAMP(3) NULL, "
          f"grp INT) ENGINE=QUEUE VISIBLE_AT_COLUMN='due' MAX_DELIVERIES={max_deliveries}"
          + (" MESSAGE_GROUP_COLUMN='grp'" if groups else "") + (f" MAX_ROWS={max_rows}" if max_rows else ""))
    s.sql("INSERT INTO test.q VALUES (0, 0, 'probe', NOW() + INTERVAL 1 HOUR, NULL)")  # the delay applies...
    assert json.loads(s.value("SELECT queue_stats('test.q')"))["delayed_rows"] == 1
    s.sql("DELETE FROM test.q")  # ...so some rows are delayed (not yet due) when the kill comes
    variant = ("-leases" if leases else "") + ("-batches" if batches else "") + \
        ("" if sync_removals else "-unsynced-removals") + ("-dead-letters" if max_deliveries else "") + \
        ("-message-groups" if groups else "") + ("-max-rows" if max_rows else "")
    rng = random.Random(f"q4m-crash-{mode}{variant}")
    cycles = CYCLES // 2 if leases or batches or max_deliveries or groups or max_rows else CYCLES
    totals = Counter()
    for cycle in range(1, cycles + 1):
        s.sql(f"SET GLOBAL queue_sync_mode = '{mode}'")
        s.sql(f"SET GLOBAL queue_sync_removals = {'ON' if sync_removals else 'OFF'}")
        ledger = run_cycle(s, cycle, rng, leases, batches, max_deliveries, groups, max_rows)
        totals["unsynced_removal_commits"] += ledger.status_before_kill["unsynced_removal_commits"]
        s.start()
        totals += check_after_restart(s, ledger, cycle)
    if max_rows:
        assert totals["refused"] > 0, "no INSERT found the table full: the MAX_ROWS cycles tested nothing new"
    if groups:
        assert totals["grouped_deliveries"] > 0, "no grouped row was handed out: the cycles tested nothing new"
    if max_deliveries:
        assert totals["dead"] > 0, "no row died: the dead-letter cycles tested nothing new"
    elif not leases:
        assert totals["delivery_counts_checked"] > 0, "no aborted row was drained: its delivery count went unchecked"
    if leases:
        assert totals["leases_expired"] > 0, "no lease ran out: the lease cycles tested nothing new"
    if batches:
        assert totals["batched"] > 0, "no batch of two or more rows: the batch cycles tested nothing new"
    if not sync_removals:
        assert totals["unsynced_removal_commits"] > 0, "no removal skipped its sync: the cycles tested nothing new"
    else:
        assert totals["unsynced_removal_commits"] == 0
    print(f"crash test ({mode}{variant}): {cycles} cycles, {dict(totals)}")
