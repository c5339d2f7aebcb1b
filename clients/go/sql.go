// Table names as queue functions take them ('db.t') and as SQL takes them (`db`.`t`).
package q4m

import (
	"fmt"
	"strings"
)

func splitTable(table string) (db, name string, err error) {
	if table == "" || strings.ContainsAny(table, ":`@") {
		return "", "", &ConfigError{fmt.Sprintf("q4m: table %q: give a plain name ('t' or 'db.t'); a condition goes in Worker.Condition, a subscription in Worker.Subscription", table)}
	}
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i], table[i+1:], nil
	}
	return "", table, nil
}

// checkSubscription: a name as queue_subscribe() allows it (1 to 64 letters, digits, '_', '-').
func checkSubscription(name string) error {
	ok := len(name) >= 1 && len(name) <= 64
	for _, c := range name {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}
	if !ok {
		return &ConfigError{fmt.Sprintf("q4m: invalid subscription name %q: 1 to 64 letters, digits, '_' and '-'", name)}
	}
	return nil
}

func quoteIdent(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

func quoteTable(table string) (string, error) {
	db, name, err := splitTable(table)
	if err != nil {
		return "", err
	}
	if db != "" {
		return quoteIdent(db) + "." + quoteIdent(name), nil
	}
	return quoteIdent(name), nil
}
