// Errors and the MariaDB error codes the worker tells apart.
package q4m

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"

	"github.com/go-sql-driver/mysql"
)

// ErrLeaseExpired is MariaDB's 1205, which queue_end() / queue_wait() / queue_renew_lease()
// raise after the row's lease ran out (or queue_release_owned()): the row went back to the
// queue and was not removed (docs/sql-api.md, "Leases").
const ErrLeaseExpired = 1205

// ErrJobAbandoned: the worker gave the job back (stop deadline, lost lease); statements of a
// transactional handler can no longer commit.
var ErrJobAbandoned = errors.New("q4m: this job was given back (stop deadline or lost lease); its transaction was rolled back")

// ConfigError: the table or the arguments do not allow what was asked.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// connectionLostCodes: server errors after which the session is gone (the server gives
// its owned row back and rolls back its transaction).
var connectionLostCodes = map[uint16]bool{1053: true, 1927: true, 4031: true, 2006: true, 2013: true}

// IsLeaseLost reports whether err is the lease-expired error (1205).
func IsLeaseLost(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == ErrLeaseExpired
}

// IsConnectionLost reports whether err means the connection is gone.
func IsConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return connectionLostCodes[me.Number]
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}
