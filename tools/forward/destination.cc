#include "destination.h"

#include "db_error.h"

namespace q4m::forward {

void Destination::open(const std::vector<std::string>& columns) {
  close();
  conn_.open(opt_.dst, opt_.io_timeout, opt_.io_timeout);
  std::string names, marks;
  for (const std::string& c : columns) {
    names += (names.empty() ? "" : ", ") + quote_identifier(c);
    marks += marks.empty() ? "?" : ", ?";
  }
  std::string sql = "INSERT INTO " + quote_identifier(opt_.dst.db) + "." + quote_identifier(opt_.dst.table) + " (" +
                    names + ") VALUES (" + marks + ")";
  stmt_ = mysql_stmt_init(conn_.handle());
  if (!stmt_) conn_.fail("mysql_stmt_init");
  if (mysql_stmt_prepare(stmt_, sql.data(), sql.size())) conn_.fail(stmt_, "prepare " + sql);
  param_count_ = columns.size();
}

void Destination::close() {
  if (stmt_) mysql_stmt_close(stmt_);
  stmt_ = nullptr;
  conn_.close();
}

bool Destination::insert(RowBuffer& row, size_t columns, uint64_t rowid) {
  if (columns != param_count_)
    throw DbError(ErrorKind::kFatal, 0, "destination: row has " + std::to_string(columns) + " columns, INSERT expects " +
                                            std::to_string(param_count_));
  // Mode 'a' always: 'w' would forget what was received and let a replay through.
  conn_.execute("SELECT queue_set_srcid(" + std::to_string(opt_.source_id) + ", 'a', " + std::to_string(rowid) + ")");
  std::vector<MYSQL_BIND> params = row.param_binds(columns);
  if (mysql_stmt_bind_param(stmt_, params.data())) conn_.fail(stmt_, "binding the row");
  if (mysql_stmt_execute(stmt_)) conn_.fail(stmt_, "INSERT of row " + std::to_string(rowid));
  return mysql_stmt_affected_rows(stmt_) > 0;
}

}  // namespace q4m::forward
