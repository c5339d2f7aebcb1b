package q4m

// Tests without a server run always; those with one need Q4M_TEST_SOCKET (a server with the
// QUEUE engine loaded at startup), which tests/integration/test_go_worker.py gives them.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestBackoffDoublesCapsAndJitters(t *testing.T) {
	b := Backoff{Base: time.Second, Cap: 10 * time.Second, Jitter: 0.5}
	one := func() float64 { return 0 }
	for n, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 100: 10 * time.Second} {
		if got := b.Delay(n, one); got != want {
			t.Errorf("delivery %d: %v, want %v", n, got, want)
		}
	}
	if got := b.Delay(3, func() float64 { return 1 }); got != 2*time.Second {
		t.Errorf("full jitter takes off half of 4 s: %v", got)
	}
}

func TestParseCreateOptions(t *testing.T) {
	o := ParseCreateOptions("`VISIBLE_AT_COLUMN`='run_at' `MESSAGE_GROUP_COLUMN`='it''s' `DEDUP_COLUMN`='k' `MAX_DELIVERIES`=5")
	want := TableOptions{VisibleAtColumn: "run_at", GroupColumn: "it's", DedupColumn: "k", MaxDeliveries: 5}
	if o != want {
		t.Fatalf("%+v, want %+v", o, want)
	}
	if o := ParseCreateOptions("`MAX_DELIVERIES`='7'"); o.MaxDeliveries != 7 { // 10.11.19 quotes numbers
		t.Fatalf("quoted number: %+v", o)
	}
}

func TestTableNamesAndErrors(t *testing.T) {
	if q, _ := quoteTable("db.t x"); q != "`db`.`t x`" {
		t.Fatal(q)
	}
	if _, err := quoteTable("t:id > 3"); err == nil {
		t.Fatal("a condition in the table name was accepted")
	}
	if !IsLeaseLost(&mysql.MySQLError{Number: 1205}) || IsLeaseLost(errors.New("x")) {
		t.Fatal("IsLeaseLost")
	}
	if !IsConnectionLost(mysql.ErrInvalidConn) || !IsConnectionLost(io.EOF) || IsConnectionLost(&mysql.MySQLError{Number: 1146}) {
		t.Fatal("IsConnectionLost")
	}
	if s := prometheusText(`a"b`, map[string]int64{"taken": 2, "in_flight": 1}); !strings.Contains(s, `q4m_worker_taken_total{table="a\"b"} 2`) ||
		!strings.Contains(s, "# TYPE q4m_worker_in_flight gauge") {
		t.Fatal(s)
	}
}

// ---- with a server ------------------------------------------------------------------------

func server(t *testing.T) *sql.DB {
	sock := os.Getenv("Q4M_TEST_SOCKET")
	if sock == "" {
		t.Skip("Q4M_TEST_SOCKET not set: run through tests/integration/test_go_worker.py")
	}
	db, err := sql.Open("mysql", "root@unix("+sock+")/test?timeout=10s&readTimeout=120s&parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

var tableSeq struct {
	sync.Mutex
	n int
}

// jobs makes a queue table with n jobs (id 0..n-1) and an InnoDB ledger; returns their names.
func jobs(t *testing.T, db *sql.DB, n int, options string) (string, string) {
	tableSeq.Lock()
	tableSeq.n++
	table, ledger := fmt.Sprintf("jobs%d", tableSeq.n), fmt.Sprintf("ledger%d", tableSeq.n)
	tableSeq.Unlock()
	mustExec(t, db, "CREATE TABLE "+table+" (id INT NOT NULL, body VARCHAR(100), run_at TIMESTAMP(6) NULL, grp VARCHAR(20), k VARCHAR(40)) ENGINE=QUEUE "+options)
	mustExec(t, db, "CREATE TABLE "+ledger+" (job_id INT NOT NULL, delivery INT, who VARCHAR(20)) ENGINE=InnoDB")
	if n > 0 {
		enqueueJobs(t, db, table, n)
	}
	return table, ledger
}

// enqueueJobs enqueues n jobs (id 0..n-1) into a table jobs() made.
func enqueueJobs(t *testing.T, db *sql.DB, table string, n int) {
	rows := make([]map[string]any, n)
	for i := range rows {
		rows[i] = map[string]any{"id": i, "body": fmt.Sprintf("job %d", i)}
	}
	if _, err := EnqueueMany(context.Background(), db, table, rows); err != nil {
		t.Fatal(err)
	}
}

func ledgerCounts(t *testing.T, db *sql.DB, ledger string) map[int]int {
	rows, err := db.Query("SELECT job_id, COUNT(*) FROM " + ledger + " GROUP BY job_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var id, n int
		rows.Scan(&id, &n)
		out[id] = n
	}
	return out
}

func queueRows(t *testing.T, db *sql.DB, table string) int {
	var n int
	if err := db.QueryRow("SELECT `ROWS` FROM information_schema.QUEUE_TABLES WHERE TABLE_SCHEMA='test' AND TABLE_NAME=?", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// start runs w until the returned stop is called; stop returns Run's result.
func start(t *testing.T, w *Worker) func() bool {
	if w.Logger == nil {
		w.Logger = log.New(io.Discard, "", 0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() {
		ok, err := w.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- ok
	}()
	var once sync.Once
	var result bool
	stop := func() bool { once.Do(func() { cancel(); result = <-done }); return result }
	t.Cleanup(func() { stop() })
	return stop
}

func TestEnqueueMapsDelayGroupAndDedupKey(t *testing.T) {
	db := server(t)
	table, _ := jobs(t, db, 0, "VISIBLE_AT_COLUMN='run_at' MESSAGE_GROUP_COLUMN='grp' DEDUP_COLUMN='k'")
	ctx := context.Background()
	if _, err := Enqueue(ctx, db, table, map[string]any{"id": 1, "body": "later"}, Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, db, table, map[string]any{"id": 2, "body": "g"}, Group("customer-42"), DedupKey("once")); err != nil {
		t.Fatal(err)
	}
	if _, err := Enqueue(ctx, db, table, map[string]any{"id": 3, "body": "dup"}, DedupKey("once")); err != nil {
		t.Fatal(err) // accepted and not queued
	}
	var future int
	var grp string
	db.QueryRow("SELECT run_at > NOW() + INTERVAL 59 MINUTE FROM " + table + " WHERE id = 1").Scan(&future)
	db.QueryRow("SELECT grp FROM " + table + " WHERE id = 2").Scan(&grp)
	if future != 1 || grp != "customer-42" || queueRows(t, db, table) != 2 {
		t.Fatalf("delay %d group %q rows %d", future, grp, queueRows(t, db, table))
	}
	plain, _ := jobs(t, db, 0, "")
	_, err := Enqueue(ctx, db, plain, map[string]any{"id": 1}, Delay(time.Second))
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "no VISIBLE_AT_COLUMN option") {
		t.Fatalf("a delay on a table without VISIBLE_AT_COLUMN: %v", err)
	}
}

func TestEnqueueJoinsTheCallersTransaction(t *testing.T) {
	db := server(t)
	table, _ := jobs(t, db, 0, "")
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	Enqueue(context.Background(), tx, table, map[string]any{"id": 1})
	tx.Rollback()
	tx, _ = db.Begin()
	Enqueue(context.Background(), tx, table, map[string]any{"id": 2})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var ids string
	db.QueryRow("SELECT GROUP_CONCAT(id) FROM " + table).Scan(&ids)
	if ids != "2" {
		t.Fatalf("rows after a rolled-back and a committed enqueue: %q", ids)
	}
}

func TestGoroutinesHandleEveryJobOnce(t *testing.T) {
	for _, transactional := range []bool{true, false} {
		t.Run(fmt.Sprint("transactional=", transactional), func(t *testing.T) {
			db := server(t)
			table, ledger := jobs(t, db, 60, "")
			w := &Worker{DB: db, Table: table, Goroutines: 4, Transactional: transactional, WaitTimeout: 200 * time.Millisecond}
			w.Handler = func(ctx context.Context, job *Job) error {
				q := "INSERT INTO " + ledger + " VALUES (?, ?, 'w')"
				var err error
				if job.Tx != nil {
					_, err = job.Tx.Exec(ctx, q, job.Row["id"], job.DeliveryCount)
				} else {
					_, err = db.ExecContext(ctx, q, job.Row["id"], job.DeliveryCount)
				}
				return err
			}
			stop := start(t, w)
			waitFor(t, "every job", func() bool { return queueRows(t, db, table) == 0 && len(ledgerCounts(t, db, ledger)) == 60 })
			if !stop() {
				t.Fatal("not stopped in time")
			}
			for id, n := range ledgerCounts(t, db, ledger) {
				if n != 1 {
					t.Errorf("job %d done %d times", id, n)
				}
			}
			if m := w.Metrics(); m["succeeded"] != 60 || m["taken"] != 60 || m["in_flight"] != 0 {
				t.Fatal(m)
			}
		})
	}
}

func TestAConditionTakesOnlyMatchingRows(t *testing.T) {
	db := server(t)
	table, _ := jobs(t, db, 10, "")
	var mu sync.Mutex
	var got []int64
	w := &Worker{DB: db, Table: table, Condition: "id >= 7", WaitTimeout: 200 * time.Millisecond,
		Handler: func(ctx context.Context, job *Job) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, toInt(job.Row["id"]))
			return nil
		}}
	stop := start(t, w)
	waitFor(t, "three rows", func() bool { return queueRows(t, db, table) == 7 })
	stop()
	if len(got) != 3 {
		t.Fatal(got)
	}
}

func TestAFailingJobIsRetriedThenBecomesADeadLetter(t *testing.T) {
	db := server(t)
	table, _ := jobs(t, db, 1, "MAX_DELIVERIES=3")
	var dead *Job
	var deliveries []int
	var mu sync.Mutex
	w := &Worker{DB: db, Table: table, WaitTimeout: 200 * time.Millisecond,
		Backoff: Backoff{Base: 50 * time.Millisecond, Cap: time.Second},
		Handler: func(ctx context.Context, job *Job) error {
			mu.Lock()
			deliveries = append(deliveries, job.DeliveryCount)
			mu.Unlock()
			return errors.New("boom")
		},
		OnDead: func(job *Job, err error) { mu.Lock(); dead = job; mu.Unlock() }}
	stop := start(t, w)
	waitFor(t, "the dead letter", func() bool { mu.Lock(); defer mu.Unlock(); return dead != nil })
	stop()
	var deadRows int
	db.QueryRow("SELECT DEAD_ROWS FROM information_schema.QUEUE_TABLES WHERE TABLE_NAME=?", table).Scan(&deadRows)
	if fmt.Sprint(deliveries) != "[1 2 3]" || deadRows != 1 {
		t.Fatalf("deliveries %v, dead rows %d", deliveries, deadRows)
	}
	if m := w.Metrics(); m["failed"] != 3 || m["aborted"] != 3 || m["dead"] != 1 {
		t.Fatal(m)
	}
}

func TestTheHeartbeatKeepsALongJobsLease(t *testing.T) {
	db := server(t)
	table, ledger := jobs(t, db, 1, "")
	w := &Worker{DB: db, Table: table, LeaseTimeout: 600 * time.Millisecond, HeartbeatInterval: 150 * time.Millisecond,
		WaitTimeout: 200 * time.Millisecond, Transactional: true,
		Handler: func(ctx context.Context, job *Job) error {
			time.Sleep(2 * time.Second) // more than three leases
			_, err := job.Tx.Exec(ctx, "INSERT INTO "+ledger+" VALUES (?, ?, 'long')", job.Row["id"], job.DeliveryCount)
			return err
		}}
	stop := start(t, w)
	waitFor(t, "the job", func() bool { return queueRows(t, db, table) == 0 })
	stop()
	if m := w.Metrics(); m["succeeded"] != 1 || m["lease_lost"] != 0 || m["taken"] != 1 {
		t.Fatal(m)
	}
}

func TestWithoutRenewalsALongJobLosesItsLease(t *testing.T) {
	db := server(t)
	table, ledger := jobs(t, db, 1, "")
	var mu sync.Mutex
	var runs []int
	w := &Worker{DB: db, Table: table, LeaseTimeout: 300 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond,
		JobTimeout: 50 * time.Millisecond, WaitTimeout: 200 * time.Millisecond, Transactional: true,
		Handler: func(ctx context.Context, job *Job) error {
			mu.Lock()
			runs = append(runs, job.DeliveryCount)
			first := len(runs) == 1
			mu.Unlock()
			if first {
				time.Sleep(1500 * time.Millisecond) // JobTimeout passes: no renewals, the lease runs out
			}
			_, err := job.Tx.Exec(ctx, "INSERT INTO "+ledger+" VALUES (?, ?, 'x')", job.Row["id"], job.DeliveryCount)
			return err
		}}
	stop := start(t, w)
	waitFor(t, "the job", func() bool { return queueRows(t, db, table) == 0 })
	stop()
	// the first run's end failed with 1205 and its write was rolled back: done once, by the second
	if c := ledgerCounts(t, db, ledger); c[0] != 1 || w.Metrics()["lease_lost"] != 1 {
		t.Fatalf("ledger %v runs %v metrics %v", c, runs, w.Metrics())
	}
}

func TestAStopDeadlineGivesTheRunningJobBack(t *testing.T) {
	db := server(t)
	table, ledger := jobs(t, db, 1, "")
	release := make(chan struct{})
	var abandoned error
	w := &Worker{DB: db, Table: table, StopDeadline: 300 * time.Millisecond, WaitTimeout: 200 * time.Millisecond, Transactional: true,
		Handler: func(ctx context.Context, job *Job) error {
			job.Tx.Exec(ctx, "INSERT INTO "+ledger+" VALUES (?, ?, 'x')", job.Row["id"], job.DeliveryCount)
			select {
			case <-ctx.Done():
			case <-release:
			}
			_, abandoned = job.Tx.Exec(context.Background(), "SELECT 1")
			return nil
		}}
	stop := start(t, w)
	waitFor(t, "the job to start", func() bool { return w.Metrics()["in_flight"] == 1 })
	if stop() {
		t.Fatal("Run said every job finished in time")
	}
	close(release)
	if !errors.Is(abandoned, ErrJobAbandoned) {
		t.Fatalf("a statement after the give-back: %v", abandoned)
	}
	if queueRows(t, db, table) != 1 || len(ledgerCounts(t, db, ledger)) != 0 || w.Metrics()["given_back"] != 1 {
		t.Fatalf("rows %d ledger %v metrics %v", queueRows(t, db, table), ledgerCounts(t, db, ledger), w.Metrics())
	}
}

// Worker.Subscription: one worker per subscription of one table (fan-out); each handles every
// row its subscription matches once, and a job failing in one (retried, then a dead letter of
// that subscription) does not touch the other.
func TestWorkersOfTwoSubscriptionsEachHandleEveryRowTheyMatchOnce(t *testing.T) {
	db := server(t)
	table, _ := jobs(t, db, 0, "MAX_DELIVERIES=2")
	mustExec(t, db, "SELECT queue_subscribe(?, 'billing')", table)
	mustExec(t, db, "SELECT queue_subscribe(?, 'email', 'id % 2 = 1')", table)
	enqueueJobs(t, db, table, 40)
	var mu sync.Mutex
	got := map[string][]int{}
	var dead []int
	handler := func(name string) Handler {
		return func(ctx context.Context, job *Job) error {
			id := int(toInt(job.Row["id"]))
			if name == "billing" && id == 7 {
				return errors.New("card declined")
			}
			mu.Lock()
			defer mu.Unlock()
			got[name] = append(got[name], id)
			return nil
		}
	}
	var workers []*Worker
	for _, name := range []string{"billing", "email"} {
		w := &Worker{DB: db, Table: table, Subscription: name, Goroutines: 2, WaitTimeout: 200 * time.Millisecond,
			Backoff: Backoff{Base: 50 * time.Millisecond, Cap: time.Second}, Handler: handler(name),
			OnDead: func(job *Job, err error) { mu.Lock(); dead = append(dead, int(toInt(job.Row["id"]))); mu.Unlock() }}
		workers = append(workers, w)
		defer start(t, w)()
	}
	waitFor(t, "every row to each subscription", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got["billing"]) == 39 && len(got["email"]) == 20 && len(dead) == 1
	})
	mu.Lock()
	sort.Ints(got["billing"])
	sort.Ints(got["email"])
	b, e := fmt.Sprint(got["billing"]), fmt.Sprint(got["email"])
	mu.Unlock()
	var wantB, wantE []int
	for i := 0; i < 40; i++ {
		if i != 7 {
			wantB = append(wantB, i)
		}
		if i%2 == 1 {
			wantE = append(wantE, i)
		}
	}
	if b != fmt.Sprint(wantB) || e != fmt.Sprint(wantE) || fmt.Sprint(dead) != "[7]" {
		t.Fatalf("billing %s, email %s, dead %v", b, e, dead)
	}
	if m := workers[0].Metrics(); m["dead"] != 1 {
		t.Fatal(m)
	}
	bad := []*Worker{
		{DB: db, Table: table, Subscription: "bill ing", Handler: handler("x")},
		{DB: db, Table: table + "@billing", Handler: handler("x")},
	}
	for i, want := range []string{"invalid subscription name", "a subscription in Worker.Subscription"} {
		if _, err := bad[i].Run(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("worker %d: %v, want %q", i, err, want)
		}
	}
}

// Worker.Subscription with Transactional: the subscription's end commits in the job's
// transaction, with the handler's writes. A job failing after its write is rolled back and
// retried (billing's row 7); so is one whose COMMIT is refused (billing's row 9: its outbox
// row finds a full MAX_ROWS table), its end rolled back with the rest: an end committed at
// once would have left billing without row 9. One ledger row per subscription and row.
// Before, the library refused the combination.
func TestExactlyOnceWorkersOfTwoSubscriptionsCommitEachEndWithTheJobsWrites(t *testing.T) {
	db := server(t)
	table, ledger := jobs(t, db, 0, "")
	box := table + "_box"
	mustExec(t, db, "CREATE TABLE "+box+" (id INT NOT NULL) ENGINE=QUEUE MAX_ROWS=1")
	mustExec(t, db, "INSERT INTO "+box+" VALUES (0)")
	mustExec(t, db, "SELECT queue_subscribe(?, 'billing')", table)
	mustExec(t, db, "SELECT queue_subscribe(?, 'email', 'id % 2 = 1')", table)
	enqueueJobs(t, db, table, 30)
	handler := func(name string) Handler {
		return func(ctx context.Context, job *Job) error {
			id := int(toInt(job.Row["id"]))
			if _, err := job.Tx.Exec(ctx, "INSERT INTO "+ledger+" VALUES (?, ?, ?)", id, job.DeliveryCount, name); err != nil {
				return err
			}
			if name == "billing" && job.DeliveryCount == 1 && id == 7 {
				return errors.New("card declined") // after its write: the rollback undoes it
			}
			if name == "billing" && job.DeliveryCount == 1 && id == 9 {
				_, err := job.Tx.Exec(ctx, "INSERT INTO "+box+" VALUES (9)") // MAX_ROWS: its COMMIT fails
				return err
			}
			return nil
		}
	}
	var workers []*Worker
	for _, name := range []string{"billing", "email"} {
		w := &Worker{DB: db, Table: table, Subscription: name, Transactional: true, Goroutines: 2,
			WaitTimeout: 200 * time.Millisecond, Backoff: Backoff{Base: 50 * time.Millisecond, Cap: time.Second},
			Handler: handler(name)}
		workers = append(workers, w)
		defer start(t, w)()
	}
	count := func(q string) int {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "every row to each subscription", func() bool {
		return count("SELECT COUNT(*) FROM "+ledger) == 45 && queueRows(t, db, table) == 0
	})
	var got []string
	r, err := db.Query("SELECT who, job_id, delivery FROM " + ledger + " ORDER BY who, job_id")
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var who string
		var id, dc int
		r.Scan(&who, &id, &dc)
		if dc != 1 {
			got = append(got, fmt.Sprintf("%s %d dc%d", who, id, dc))
		}
	}
	r.Close()
	if fmt.Sprint(got) != "[billing 7 dc2 billing 9 dc2]" {
		t.Fatalf("rows not from their first delivery: %v", got)
	}
	if n := count("SELECT COUNT(DISTINCT who, job_id) FROM " + ledger); n != 45 {
		t.Fatalf("%d distinct (subscription, row) pairs, want 45", n)
	}
	if m := workers[0].Metrics(); m["failed"] != 2 || m["succeeded"] != 30 {
		t.Fatal(m)
	}
	if n := count("SELECT COUNT(*) FROM " + box); n != 1 {
		t.Fatalf("%d rows in the full outbox", n)
	}
}
