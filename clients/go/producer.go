// Producing: Enqueue and EnqueueMany into a QUEUE table.
//
// A row is a map of column values. Delay, Group and DedupKey go into the columns the table
// names in its VISIBLE_AT_COLUMN, MESSAGE_GROUP_COLUMN and DEDUP_COLUMN options. The library
// never commits: given a *sql.Tx, the rows are queued at the caller's Commit, with its
// InnoDB rows, or not at all (docs/transactions.md, the transactional outbox).
package q4m

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Execer is what producing needs: *sql.DB, *sql.Conn and *sql.Tx have it.
type Execer interface {
	Querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// EnqueueOption sets the delay, group or deduplication key of every row of one call.
type EnqueueOption func(*enqueueOptions)

type enqueueOptions struct {
	delay    *time.Duration
	group    *string
	dedupKey *string
}

// Delay: the rows are handed out no earlier than d from now (server clock), via the table's
// VISIBLE_AT_COLUMN.
func Delay(d time.Duration) EnqueueOption { return func(o *enqueueOptions) { o.delay = &d } }

// Group: the rows' message group (FIFO per group), via MESSAGE_GROUP_COLUMN.
func Group(g string) EnqueueOption { return func(o *enqueueOptions) { o.group = &g } }

// DedupKey: a duplicate key within the table's DEDUP_WINDOW is accepted and not queued.
func DedupKey(k string) EnqueueOption { return func(o *enqueueOptions) { o.dedupKey = &k } }

// Enqueue inserts one row. It returns the rows the server reports (a dropped duplicate
// counts, as the server accepts it).
func Enqueue(ctx context.Context, q Execer, table string, row map[string]any, opts ...EnqueueOption) (int64, error) {
	return EnqueueMany(ctx, q, table, []map[string]any{row}, opts...)
}

// EnqueueMany inserts rows (maps with the same keys) in one multi-row INSERT: all or none.
func EnqueueMany(ctx context.Context, q Execer, table string, rows []map[string]any, opts ...EnqueueOption) (int64, error) {
	if len(rows) == 0 {
		return 0, &ConfigError{"q4m: no rows to enqueue"}
	}
	var o enqueueOptions
	for _, f := range opts {
		f(&o)
	}
	quoted, err := quoteTable(table)
	if err != nil {
		return 0, err
	}
	cols := make([]string, 0, len(rows[0]))
	for c := range rows[0] {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for i, r := range rows {
		if len(r) != len(cols) {
			return 0, &ConfigError{fmt.Sprintf("q4m: row %d has other columns than row 0", i)}
		}
		for _, c := range cols {
			if _, ok := r[c]; !ok {
				return 0, &ConfigError{fmt.Sprintf("q4m: row %d lacks column %q", i, c)}
			}
		}
	}
	type extra struct {
		col, expr string
		arg       any
	}
	var extras []extra
	if o.delay != nil || o.group != nil || o.dedupKey != nil {
		t, err := ReadTableOptions(ctx, q, table)
		if err != nil {
			return 0, err
		}
		need := func(kind, option, col string) (string, error) {
			if col == "" {
				return "", &ConfigError{fmt.Sprintf("q4m: table %q has no %s option, so %s cannot be given", table, option, kind)}
			}
			return col, nil
		}
		if o.delay != nil {
			if *o.delay < 0 {
				return 0, &ConfigError{fmt.Sprintf("q4m: delay must be >= 0, not %v", *o.delay)}
			}
			c, err := need("Delay", "VISIBLE_AT_COLUMN", t.VisibleAtColumn)
			if err != nil {
				return 0, err
			}
			extras = append(extras, extra{c, "NOW(6) + INTERVAL ? MICROSECOND", o.delay.Microseconds()})
		}
		if o.group != nil {
			c, err := need("Group", "MESSAGE_GROUP_COLUMN", t.GroupColumn)
			if err != nil {
				return 0, err
			}
			extras = append(extras, extra{c, "?", *o.group})
		}
		if o.dedupKey != nil {
			c, err := need("DedupKey", "DEDUP_COLUMN", t.DedupColumn)
			if err != nil {
				return 0, err
			}
			extras = append(extras, extra{c, "?", *o.dedupKey})
		}
	}
	names := make([]string, 0, len(cols)+len(extras))
	for _, c := range cols {
		names = append(names, quoteIdent(c))
	}
	for _, e := range extras {
		if _, dup := rows[0][e.col]; dup {
			return 0, &ConfigError{fmt.Sprintf("q4m: column %q is given both in the row and as an option", e.col)}
		}
		names = append(names, quoteIdent(e.col))
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")
	for i, e := range extras {
		if i > 0 || len(cols) > 0 {
			one += ", "
		}
		one += e.expr
	}
	one += ")"
	args := make([]any, 0, len(rows)*(len(cols)+len(extras)))
	tuples := make([]string, len(rows))
	for i, r := range rows {
		tuples[i] = one
		for _, c := range cols {
			args = append(args, r[c])
		}
		for _, e := range extras {
			args = append(args, e.arg)
		}
	}
	res, err := q.ExecContext(ctx, "INSERT INTO "+quoted+" ("+strings.Join(names, ", ")+") VALUES "+strings.Join(tuples, ", "), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
