// Table names as queue functions take them ('db.t') and as SQL takes them (`db`.`t`).
package q4m

import (
	"fmt"
	"strings"
)

func splitTable(table string) (db, name string, err error) {
	if table == "" || strings.ContainsAny(table, ":`") {
		return "", "", &ConfigError{fmt.Sprintf("q4m: table %q: give a plain name ('t' or 'db.t'); a condition goes in Worker.Condition", table)}
	}
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return table[:i], table[i+1:], nil
	}
	return "", table, nil
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
