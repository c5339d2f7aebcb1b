#define MYSQL_SERVER 1
#include <my_global.h>
#include <my_base.h>
#include <mysqld_error.h>
#include <sql_class.h>
#include <sql_table.h>

#include "engine/sql_errors.h"

namespace q4m_engine {

unsigned sql_errno_for(q4m::ErrorCode code) {
  switch (code) {
    case q4m::ErrorCode::kNotFound: return ER_NO_SUCH_TABLE;
    case q4m::ErrorCode::kDropped: return ER_NO_SUCH_TABLE;  // dropped by DDL meanwhile
    case q4m::ErrorCode::kNoSpace:
    case q4m::ErrorCode::kFull: return ER_RECORD_FILE_FULL;  // (kFull: as a MEMORY table past MAX_ROWS)
    case q4m::ErrorCode::kInterrupted: return ER_QUERY_INTERRUPTED;
    case q4m::ErrorCode::kExists: return ER_TABLE_EXISTS_ERROR;
    case q4m::ErrorCode::kInvalid: return ER_WRONG_ARGUMENTS;
    // A lease is a lock held for a time; drivers treat this number as "retry", and rerunning
    // the consume statement is the right retry (it takes the next row).
    case q4m::ErrorCode::kLeaseExpired: return ER_LOCK_WAIT_TIMEOUT;
    case q4m::ErrorCode::kRowsMoved: return ER_LOCK_WAIT_TIMEOUT;  // as an expired lease: not removed, retry
    case q4m::ErrorCode::kLocked: return ER_CANT_LOCK;  // the file is open in another server
    case q4m::ErrorCode::kBlocked: return ER_LOCK_WAIT_TIMEOUT;  // as an InnoDB commit a backup holds back
    // One row's bytes, not the table: the handler error stays a generic one (HA_ERR_CRASHED
    // would tell the server, and the user, that the table needs a repair).
    case q4m::ErrorCode::kDamaged: return ER_FILE_CORRUPT;
    default: return ER_UNKNOWN_ERROR;
  }
}

static int handler_error_for(q4m::ErrorCode code) {
  switch (code) {
    case q4m::ErrorCode::kNotFound: return HA_ERR_NO_SUCH_TABLE;
    case q4m::ErrorCode::kDropped: return HA_ERR_NO_SUCH_TABLE;
    case q4m::ErrorCode::kCorrupt: return HA_ERR_CRASHED;
    case q4m::ErrorCode::kNoSpace:
    case q4m::ErrorCode::kFull: return HA_ERR_RECORD_FILE_FULL;
    case q4m::ErrorCode::kInterrupted: return HA_ERR_ABORTED_BY_USER;
    case q4m::ErrorCode::kExists: return HA_ERR_TABLE_EXIST;
    default: return HA_ERR_INTERNAL_ERROR;
  }
}

int raise_status_error(const q4m::Status& st) {
  if (st.code() == q4m::ErrorCode::kInterrupted)
    my_error(ER_QUERY_INTERRUPTED, MYF(0));  // the standard text clients recognise
  else
    my_printf_error(sql_errno_for(st.code()), "%s", MYF(0), st.message().c_str());
  return handler_error_for(st.code());
}

int raise_table_error(const std::string& table_label, const q4m::Status& st) {
  if (st.code() == q4m::ErrorCode::kDamaged)  // the storage layer knows the file, not the table
    return raise_status_error(q4m::Status(st.code(), "QUEUE table '" + table_label + "': " + st.message()));
  if (st.code() == q4m::ErrorCode::kFull)
    return raise_status_error(q4m::Status(st.code(), "QUEUE table '" + table_label + "' is full: " + st.message() +
                                                         ", none of them was added. Consume rows, or raise MAX_ROWS "
                                                         "with ALTER TABLE"));
  return raise_status_error(st);
}

bool split_table_path(const std::string& data_path, std::string* db, std::string* table) {
  // ./<db>/<table>.Q4M, each part in the server's file-name encoding.
  auto decoded = [](const std::string& file_name) {
    char buf[NAME_LEN + 1];
    const size_t n = filename_to_tablename(file_name.c_str(), buf, sizeof(buf), false);
    return std::string(buf, n);
  };
  const size_t slash = data_path.rfind('/');
  const size_t dot = data_path.rfind('.');
  const size_t db_slash = slash == std::string::npos || slash == 0 ? std::string::npos : data_path.rfind('/', slash - 1);
  if (slash == std::string::npos || dot == std::string::npos || dot < slash || db_slash == std::string::npos)
    return false;
  *db = decoded(data_path.substr(db_slash + 1, slash - db_slash - 1));
  *table = decoded(data_path.substr(slash + 1, dot - slash - 1));
  return true;
}

std::string table_label_of_path(const std::string& data_path) {
  std::string db, table;
  return split_table_path(data_path, &db, &table) ? db + "." + table : data_path;
}

void raise_lease_expired(const char* function, const std::string& table_label, const q4m::Status& st) {
  const bool expired = st.code() == q4m::ErrorCode::kLeaseExpired;
  my_printf_error(sql_errno_for(st.code()), "%s(): %stable '%s': %s", MYF(0), function, expired ? "lease expired: " : "",
                  table_label.c_str(), st.message().c_str());
}

}  // namespace q4m_engine
