// Consuming: a Worker runs a handler for each row of a QUEUE table on N goroutines.
//
// Each goroutine has its own connection (a *sql.Conn of the caller's *sql.DB) and takes rows
// in owner mode (SELECT t.* FROM t WHERE queue_wait('t', timeout)). While the handler runs
// a heartbeat renews the row's lease (queue_renew_lease()); on success the row is ended
// (queue_end()), on an error it is given back with queue_abort(backoff). With Transactional
// the handler writes through job.Tx inside a transaction that the worker commits together
// with the row's queue_end() (docs/transactions.md): exactly once.
package q4m

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Handler does one job. Its context ends at the stop deadline or when the lease is lost.
type Handler func(ctx context.Context, job *Job) error

// Job is one row handed to a handler.
type Job struct {
	Table         string
	Row           map[string]any // column -> value; text and blobs as string
	RowID         uint64         // queue_rowid()
	DeliveryCount int            // queue_delivery_count(): 1 the first time
	// Tx runs statements inside the job's transaction (Transactional only; nil otherwise).
	// Do not commit or roll back: the worker does, with the row's queue_end().
	Tx *JobTx

	s         *session
	leaseLost atomic.Bool
	started   time.Time
}

// LeaseLost: the heartbeat found the lease gone (the row went back to the queue); a long
// handler may give up early (its context is cancelled too).
func (j *Job) LeaseLost() bool { return j.leaseLost.Load() }

// JobTx: the job's transaction, shared with the heartbeat's renewals, statement by statement.
type JobTx struct{ s *session }

func (t *JobTx) lock() (*sql.Tx, error) {
	t.s.mu.Lock()
	if t.s.abandoned.Load() || t.s.tx == nil {
		t.s.mu.Unlock()
		return nil, ErrJobAbandoned
	}
	return t.s.tx, nil
}

// Exec runs one statement in the job's transaction.
func (t *JobTx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	tx, err := t.lock()
	if err != nil {
		return nil, err
	}
	defer t.s.mu.Unlock()
	return tx.ExecContext(ctx, query, args...)
}

// QueryRow runs one query in the job's transaction and scans its first row into dest.
func (t *JobTx) QueryRow(ctx context.Context, dest []any, query string, args ...any) error {
	tx, err := t.lock()
	if err != nil {
		return err
	}
	defer t.s.mu.Unlock()
	return tx.QueryRowContext(ctx, query, args...).Scan(dest...)
}

// Worker consumes one table. Set the fields, then Run.
type Worker struct {
	DB        *sql.DB
	Table     string // 't' or 'db.t'
	Condition string // optional: queue_wait('t:<Condition>')
	// Subscription: consume the table's subscription of that name (queue_subscribe) instead
	// of the table: queue_wait('t@<Subscription>'); retries, leases and dead letters are the
	// subscription's. With Transactional the subscription's end commits in the job's
	// transaction, with the handler's writes.
	Subscription string
	Handler   Handler

	Goroutines        int           // default 1
	LeaseTimeout      time.Duration // default 30 s; NoLease for none
	NoLease           bool          // no lease and no heartbeat
	HeartbeatInterval time.Duration // default LeaseTimeout / 3
	JobTimeout        time.Duration // renewals stop after it (a hung handler loses its row); 0: never
	WaitTimeout       time.Duration // queue_wait's timeout per call, default 1 s
	Transactional     bool          // exactly once with the handler's job.Tx writes
	Backoff           Backoff       // default DefaultBackoff
	StopDeadline      time.Duration // default 30 s
	ReconnectDelay    time.Duration // default 100 ms, doubling to ReconnectMaxDelay (default 5 s)
	ReconnectMaxDelay time.Duration
	OnDead            func(job *Job, err error) // after the abort that made the row a dead letter
	Logger            *log.Logger

	metrics       *metrics
	maxDeliveries atomic.Int64 // -1 until read
	stopping      atomic.Bool
	hard          context.Context // ends at the stop deadline
	sessions      []*session
	once          sync.Once
}

type session struct {
	index     int
	mu        sync.Mutex // the connection: the goroutine, its transactional handler, the heartbeat, a give-back
	conn      *sql.Conn
	connID    atomic.Int64 // CONNECTION_ID(), for a KILL from another connection
	tx        *sql.Tx
	job       *Job
	abandoned atomic.Bool // the job was given back by the stop deadline: never end it
	connected bool
	inHand    atomic.Pointer[Job] // the job between its take and its end: read by a give-back
}

func (w *Worker) init() {
	w.once.Do(func() {
		w.metrics = newMetrics()
		w.maxDeliveries.Store(-1)
		if w.Goroutines <= 0 {
			w.Goroutines = 1
		}
		if w.LeaseTimeout <= 0 {
			w.LeaseTimeout = 30 * time.Second
		}
		if w.HeartbeatInterval <= 0 {
			w.HeartbeatInterval = w.LeaseTimeout / 3
		}
		if w.WaitTimeout <= 0 {
			w.WaitTimeout = time.Second
		}
		if w.Backoff == (Backoff{}) {
			w.Backoff = DefaultBackoff
		}
		if w.StopDeadline <= 0 {
			w.StopDeadline = 30 * time.Second
		}
		if w.ReconnectDelay <= 0 {
			w.ReconnectDelay = 100 * time.Millisecond
		}
		if w.ReconnectMaxDelay <= 0 {
			w.ReconnectMaxDelay = 5 * time.Second
		}
		if w.Logger == nil {
			w.Logger = log.Default()
		}
	})
}

// Metrics: taken, succeeded, failed, aborted, dead, lease_lost, uncertain_ends, given_back,
// reconnects, and the gauge in_flight.
func (w *Worker) Metrics() map[string]int64 { w.init(); return w.metrics.snapshot() }

// PrometheusText renders Metrics() for a /metrics endpoint (q4m_worker_succeeded_total{table="t"}).
func (w *Worker) PrometheusText() string { return prometheusText(w.Table, w.Metrics()) }

// Run consumes until ctx ends, then stops gracefully: no new rows; jobs in hand get
// StopDeadline to finish and are ended normally; past it their rows are given back
// (queue_abort(), or KILL of the connection if the handler is inside a statement) and their
// handlers' contexts cancelled. Returns whether every job finished in time.
func (w *Worker) Run(ctx context.Context) (bool, error) {
	w.init()
	if w.DB == nil || w.Handler == nil {
		return false, &ConfigError{"q4m: Worker needs DB and Handler"}
	}
	if _, _, err := splitTable(w.Table); err != nil {
		return false, err
	}
	if w.Subscription != "" {
		if err := checkSubscription(w.Subscription); err != nil {
			return false, err
		}
	}
	hard, cancelHard := context.WithCancel(context.Background())
	defer cancelHard()
	w.hard = hard
	var wg sync.WaitGroup
	w.sessions = make([]*session, w.Goroutines)
	for i := range w.sessions {
		s := &session{index: i}
		w.sessions[i] = s
		wg.Add(1)
		go func() { defer wg.Done(); w.loop(s) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-ctx.Done():
	case <-done:
		return true, nil
	}
	w.stopping.Store(true)
	select {
	case <-done:
		return true, nil
	case <-time.After(w.StopDeadline):
	}
	for _, s := range w.sessions {
		w.giveBack(s)
	}
	cancelHard()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a handler that ignores its context: leave it
	}
	return false, nil
}

func (w *Worker) spec() string {
	spec := w.Table
	if w.Subscription != "" {
		spec += "@" + w.Subscription
	}
	if w.Condition != "" {
		spec += ":" + w.Condition
	}
	return spec
}

func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func (w *Worker) loop(s *session) {
	defer w.drop(s)
	for !w.stopping.Load() {
		if s.conn == nil && !w.connect(s) {
			return
		}
		job, err := w.take(s)
		if err == nil && job != nil {
			err = w.process(s, job)
		}
		if err != nil {
			if IsConnectionLost(err) {
				w.Logger.Printf("q4m %s: connection lost: %v", w.Table, err)
			} else {
				w.Logger.Printf("q4m %s: %v", w.Table, err)
				time.Sleep(w.ReconnectDelay)
			}
			w.drop(s)
		}
	}
}

func (w *Worker) connect(s *session) bool {
	delay := w.ReconnectDelay
	for !w.stopping.Load() {
		err := func() error {
			conn, err := w.DB.Conn(context.Background())
			if err != nil {
				return err
			}
			setup := func() error {
				if !w.NoLease {
					q := fmt.Sprintf("SET SESSION queue_lease_timeout = %.3f", w.LeaseTimeout.Seconds())
					if _, err := conn.ExecContext(context.Background(), q); err != nil {
						return err
					}
				}
				var id int64
				if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
					return err
				}
				s.connID.Store(id)
				if w.maxDeliveries.Load() < 0 {
					o, err := ReadTableOptions(context.Background(), conn, w.Table)
					if err != nil {
						return err
					}
					w.maxDeliveries.Store(int64(o.MaxDeliveries))
				}
				return nil
			}
			if err := setup(); err != nil {
				conn.Close()
				return err
			}
			s.mu.Lock()
			s.conn = conn
			s.abandoned.Store(false)
			s.mu.Unlock()
			return nil
		}()
		if err == nil {
			if s.connected {
				w.metrics.inc("reconnects")
			}
			s.connected = true
			return true
		}
		if !IsConnectionLost(err) {
			w.Logger.Printf("q4m %s: cannot set up a connection: %v", w.Table, err)
		}
		time.Sleep(delay)
		if delay *= 2; delay > w.ReconnectMaxDelay {
			delay = w.ReconnectMaxDelay
		}
	}
	return false
}

func (w *Worker) drop(s *session) {
	s.mu.Lock()
	s.rollback() // a Tx holds its Conn: Close would wait for it
	conn := s.conn
	s.conn, s.job = nil, nil
	s.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}

func (w *Worker) take(s *session) (*Job, error) {
	quoted, _ := quoteTable(w.Table)
	q := fmt.Sprintf("SELECT %s.*, queue_delivery_count() AS __q4m_dc, queue_rowid() AS __q4m_rid FROM %s WHERE queue_wait(%s, %.3f)",
		quoted, quoted, sqlString(w.spec()), w.WaitTimeout.Seconds())
	rows, err := s.conn.QueryContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err() // timed out: owner mode owning nothing, which the next wait ends
	}
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	job := &Job{Table: w.Table, Row: map[string]any{}, s: s, started: time.Now()}
	for i, n := range names {
		v := vals[i]
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		switch n {
		case "__q4m_dc":
			job.DeliveryCount = int(toInt(v))
		case "__q4m_rid":
			job.RowID = uint64(toInt(v))
		default:
			job.Row[n] = v
		}
	}
	w.metrics.inc("taken")
	return job, rows.Err()
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	case string:
		var n int64
		fmt.Sscan(x, &n)
		return n
	}
	return 0
}

// exec runs a statement on the job's transaction if there is one, else on the connection.
// Called with s.mu held.
func (s *session) exec(q string) error {
	var err error
	if s.tx != nil {
		_, err = s.tx.ExecContext(context.Background(), q)
	} else {
		_, err = s.conn.ExecContext(context.Background(), q)
	}
	return err
}

func (s *session) rollback() {
	if s.tx != nil {
		s.tx.Rollback()
		s.tx = nil
	}
}

func (w *Worker) process(s *session, job *Job) error {
	jobCtx, cancel := context.WithCancel(w.hard)
	defer cancel()
	s.mu.Lock()
	s.job = job
	s.inHand.Store(job)
	defer s.inHand.Store(nil)
	s.abandoned.Store(false)
	if w.Transactional {
		tx, err := s.conn.BeginTx(context.Background(), nil)
		if err != nil {
			s.job = nil
			s.mu.Unlock()
			return err
		}
		s.tx = tx
		job.Tx = &JobTx{s: s}
	}
	s.mu.Unlock()
	w.metrics.inFlight.Add(1)
	defer w.metrics.inFlight.Add(-1)

	stopBeat := w.heartbeat(s, job, cancel)
	err := w.runHandler(jobCtx, job)
	stopBeat()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.abandoned.Load() || s.conn == nil {
		s.job = nil // the stop deadline gave the job back (its connection is closed)
		return nil
	}
	s.job = nil
	if job.leaseLost.Load() {
		// The row went back to the queue: never end it; undo the job's writes.
		w.metrics.inc("lease_lost")
		s.rollback()
		if e := s.exec("SELECT queue_abort()"); IsConnectionLost(e) {
			return e
		}
		return nil
	}
	if err != nil && w.Transactional && IsConnectionLost(err) {
		return err // the job's own connection died: the server gave the row back
	}
	if err == nil {
		return w.end(s, job)
	}
	return w.fail(s, job, err)
}

func (w *Worker) runHandler(ctx context.Context, job *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("q4m: handler panicked: %v", r)
		}
	}()
	return w.Handler(ctx, job)
}

// heartbeat renews the job's lease every HeartbeatInterval until the returned func is called.
func (w *Worker) heartbeat(s *session, job *Job, cancel context.CancelFunc) func() {
	if w.NoLease {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(w.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if w.JobTimeout > 0 && time.Since(job.started) > w.JobTimeout {
				w.Logger.Printf("q4m %s: row %d: handler running for more than JobTimeout (%v): no more lease renewals", w.Table, job.RowID, w.JobTimeout)
				return
			}
			// A statement of the handler holds the connection: try at the next beat.
			if !s.mu.TryLock() {
				continue
			}
			if s.job != job || s.abandoned.Load() || s.conn == nil {
				s.mu.Unlock()
				return
			}
			err := s.exec("SELECT queue_renew_lease()")
			s.mu.Unlock()
			if IsLeaseLost(err) {
				job.leaseLost.Store(true)
				cancel()
				return
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

func (w *Worker) end(s *session, job *Job) error {
	err := s.exec("SELECT queue_end()")
	if err == nil && s.tx != nil {
		err = s.tx.Commit()
		s.tx = nil
	}
	switch {
	case err == nil:
		w.metrics.inc("succeeded")
		return nil
	case IsLeaseLost(err):
		// The row went back to the queue: another worker does it again; never retry the end.
		w.Logger.Printf("q4m %s: row %d: %v", w.Table, job.RowID, err)
		w.metrics.inc("lease_lost")
		s.rollback()
		return nil
	case IsConnectionLost(err):
		// Removed (the commit got through) or back in the queue: never end it twice.
		w.metrics.inc("uncertain_ends")
		return err
	}
	// A COMMIT refused (a deadlock, MAX_ROWS of an outbox insert): rolled back with its
	// queue_end(), so the row is ours again: give it back for a retry.
	w.Logger.Printf("q4m %s: row %d: ending it failed: %v", w.Table, job.RowID, err)
	w.metrics.inc("failed")
	s.rollback()
	var rid sql.NullInt64
	if e := s.conn.QueryRowContext(context.Background(), "SELECT queue_rowid()").Scan(&rid); e == nil && rid.Valid {
		if e := s.exec(fmt.Sprintf("SELECT queue_abort(%.3f)", w.Backoff.Delay(job.DeliveryCount, nil).Seconds())); e != nil {
			return e
		}
		w.metrics.inc("aborted")
	}
	return nil
}

func (w *Worker) fail(s *session, job *Job, herr error) error {
	w.Logger.Printf("q4m %s: row %d (delivery %d) failed: %v", w.Table, job.RowID, job.DeliveryCount, herr)
	w.metrics.inc("failed")
	s.rollback()
	if err := s.exec(fmt.Sprintf("SELECT queue_abort(%.3f)", w.Backoff.Delay(job.DeliveryCount, nil).Seconds())); err != nil {
		if IsLeaseLost(err) {
			w.metrics.inc("lease_lost")
			return nil
		}
		return err
	}
	w.metrics.inc("aborted")
	if max := w.maxDeliveries.Load(); max > 0 && int64(job.DeliveryCount) >= max {
		w.metrics.inc("dead")
		if w.OnDead != nil {
			w.OnDead(job, herr)
		}
	}
	return nil
}

// giveBack, at the stop deadline: the handler still runs; give its row back now and close
// the connection, so that nothing it does later can end the row or commit.
func (w *Worker) giveBack(s *session) {
	if s.inHand.Load() == nil {
		return
	}
	for wait := time.Now().Add(time.Second); time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
		if !s.mu.TryLock() {
			continue
		}
		defer s.mu.Unlock()
		if s.job == nil || s.conn == nil {
			return
		}
		w.abandon(s)
		s.rollback()
		s.exec("SELECT queue_abort()")
		s.conn.Close()
		s.conn = nil
		return
	}
	// The handler is inside a statement on the connection: end the session from outside;
	// the server rolls back its transaction and gives the row back, as queue_abort() does.
	w.abandon(s)
	if _, err := w.DB.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", s.connID.Load())); err != nil {
		w.Logger.Printf("q4m %s: could not give a row back: %v", w.Table, err)
	}
}

func (w *Worker) abandon(s *session) {
	if s.abandoned.Swap(true) {
		return
	}
	w.metrics.inc("given_back")
	w.metrics.inc("aborted")
	w.Logger.Printf("q4m %s: stop deadline: giving a row back", w.Table)
}
