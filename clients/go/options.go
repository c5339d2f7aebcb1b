// What the producer and the worker need of a table's q4m options, read from
// information_schema.TABLES.CREATE_OPTIONS once per table.
package q4m

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// TableOptions: the columns a table names for delays, groups and dedup keys, and its
// MAX_DELIVERIES (0: none).
type TableOptions struct {
	VisibleAtColumn, GroupColumn, DedupColumn string
	MaxDeliveries                             int
}

var optionRE = regexp.MustCompile("(?i)`?(VISIBLE_AT_COLUMN|MESSAGE_GROUP_COLUMN|DEDUP_COLUMN|MAX_DELIVERIES)`?" +
	`\s*=\s*(?:'((?:[^'\\]|\\.|'')*)'|(\d+))`)

// ParseCreateOptions reads CREATE_OPTIONS (or SHOW CREATE TABLE's tail).
func ParseCreateOptions(text string) TableOptions {
	found := map[string]string{}
	for _, m := range optionRE.FindAllStringSubmatch(text, -1) {
		v := m[3]
		if m[2] != "" || m[3] == "" {
			v = strings.NewReplacer("''", "'", `\'`, "'", `\\`, `\`).Replace(m[2])
		}
		found[strings.ToUpper(m[1])] = v
	}
	n, _ := strconv.Atoi(found["MAX_DELIVERIES"])
	return TableOptions{VisibleAtColumn: found["VISIBLE_AT_COLUMN"], GroupColumn: found["MESSAGE_GROUP_COLUMN"],
		DedupColumn: found["DEDUP_COLUMN"], MaxDeliveries: n}
}

// Querier is what reading options needs: *sql.DB, *sql.Conn and *sql.Tx have it.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var optionCache sync.Map // table -> TableOptions

// ForgetTableOptions drops the cached options (after an ALTER TABLE that changed them).
func ForgetTableOptions() { optionCache.Range(func(k, _ any) bool { optionCache.Delete(k); return true }) }

// ReadTableOptions returns the table's options (cached per table name).
func ReadTableOptions(ctx context.Context, q Querier, table string) (TableOptions, error) {
	if v, ok := optionCache.Load(table); ok {
		return v.(TableOptions), nil
	}
	db, name, err := splitTable(table)
	if err != nil {
		return TableOptions{}, err
	}
	var engine string
	var opts sql.NullString
	err = q.QueryRowContext(ctx, "SELECT ENGINE, CREATE_OPTIONS FROM information_schema.TABLES "+
		"WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ?", db, name).Scan(&engine, &opts)
	if err == sql.ErrNoRows {
		return TableOptions{}, &ConfigError{fmt.Sprintf("q4m: table %q does not exist (or this account cannot see it)", table)}
	}
	if err != nil {
		return TableOptions{}, err
	}
	if !strings.EqualFold(engine, "QUEUE") {
		return TableOptions{}, &ConfigError{fmt.Sprintf("q4m: table %q is not a QUEUE table (ENGINE=%s)", table, engine)}
	}
	o := ParseCreateOptions(opts.String)
	optionCache.Store(table, o)
	return o, nil
}
