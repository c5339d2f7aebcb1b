#include "db_error.h"

#include <errmsg.h>
#include <mysqld_error.h>

namespace q4m::forward {

ErrorKind classify_error(unsigned code) {
  switch (code) {
    // Server-side conditions that pass: restart, overload, kill, timeouts.
    case ER_CON_COUNT_ERROR:
    case ER_SERVER_SHUTDOWN:
    case ER_NORMAL_SHUTDOWN:
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_LOCK_DEADLOCK:
    case ER_QUERY_INTERRUPTED:
    case ER_CONNECTION_KILLED:
    case ER_NET_READ_ERROR:
    case ER_NET_READ_INTERRUPTED:
    case ER_NET_ERROR_ON_WRITE:
    case ER_NET_WRITE_INTERRUPTED:
    case ER_NEW_ABORTING_CONNECTION:
    case ER_ABORTING_CONNECTION:
    case ER_TOO_MANY_USER_CONNECTIONS:
    case ER_USER_LIMIT_REACHED:
    case ER_OUT_OF_RESOURCES:
    case ER_HOST_IS_BLOCKED:
    case ER_OUTOFMEMORY:
    case ER_STATEMENT_TIMEOUT:
    // A destination at its MAX_ROWS, or on a full disk, takes rows again once it drains:
    // back-pressure, not a reason to stop.
    case ER_RECORD_FILE_FULL:
      return ErrorKind::kTransient;
    // Configuration: restarting with the same settings gives the same answer.
    case ER_ACCESS_DENIED_ERROR:
    case ER_DBACCESS_DENIED_ERROR:
    case ER_TABLEACCESS_DENIED_ERROR:
    case ER_COLUMNACCESS_DENIED_ERROR:
    case ER_SPECIFIC_ACCESS_DENIED_ERROR:
    case ER_BAD_DB_ERROR:
    case ER_NO_SUCH_TABLE:
    case ER_BAD_FIELD_ERROR:
    case ER_SP_DOES_NOT_EXIST:
    case ER_UNKNOWN_STORAGE_ENGINE:
    case ER_HOST_NOT_PRIVILEGED:
    case ER_PASSWORD_NO_MATCH:
      return ErrorKind::kConfig;
    default:
      break;
  }
  if (code >= CR_MIN_ERROR && code <= CR_MAX_ERROR) {
    // Client library: nearly all are "could not reach / lost the server".
    if (code == CR_AUTH_PLUGIN_CANNOT_LOAD) return ErrorKind::kConfig;
    return ErrorKind::kTransient;
  }
  return ErrorKind::kFatal;
}

}  // namespace q4m::forward
