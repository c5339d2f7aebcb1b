#include "destination.h"

#include "db_error.h"
#include "log.h"

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
  if (mysql_stmt_affected_rows(stmt_) == 0) return false;
  return mysql_warning_count(conn_.handle()) == 0 || !dropped_per_warnings(rowid);
}

bool Destination::dropped_per_warnings(uint64_t rowid) {
  // The engine reports a dropped replay as a successful one-row INSERT (Q4M compatible);
  // an engine that also adds a note naming queue_set_srcid lets us count replays and catch
  // a misconfigured source id. Other warnings mean the values were changed: log them.
  bool dropped = false;
  for (const SqlRow& w : conn_.query("SHOW WARNINGS")) {
    std::string text = w.size() > 2 ? w[2].value_or("") : "";
    if (text.find("queue_set_srcid") != std::string::npos) {
      dropped = true;
    } else if (warnings_logged_ < kMaxLoggedWarnings) {
      ++warnings_logged_;
      log_line("destination: warning on INSERT of source row %llu: %s %s: %s%s",
               static_cast<unsigned long long>(rowid), w[0].value_or("").c_str(), w[1].value_or("").c_str(),
               text.c_str(), warnings_logged_ == kMaxLoggedWarnings ? " (further warnings not logged)" : "");
    }
  }
  return dropped;
}

}  // namespace q4m::forward
