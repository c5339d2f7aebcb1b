#include "destination.h"

#include <algorithm>
#include <cstdio>

#include "db_error.h"
#include "log.h"

namespace q4m::forward {

namespace {
constexpr size_t kMaxPlaceholders = 65535;  // per prepared statement (the protocol's 2-byte count)
}

void Destination::open(const std::vector<std::string>& columns) {
  close();
  conn_.open(opt_.dst, opt_.io_timeout, opt_.io_timeout);
  std::string names, marks;
  for (const std::string& c : columns) {
    names += (names.empty() ? "" : ", ") + quote_identifier(c);
    marks += marks.empty() ? "?" : ", ?";
  }
  insert_head_ = "INSERT INTO " + quote_identifier(opt_.dst.db) + "." + quote_identifier(opt_.dst.table) + " (" +
                 names + ") VALUES ";
  row_marks_ = "(" + marks + ")";
  param_count_ = columns.size();
  max_packet_ = read_max_packet();
  statement_for(1);  // fails now, not at the first row, if the INSERT cannot be prepared
}

void Destination::close_statements() {
  for (auto& s : statements_) mysql_stmt_close(s.second);
  statements_.clear();
}

void Destination::close() {
  close_statements();
  conn_.close();
}

size_t Destination::read_max_packet() {
  auto rows = conn_.query("SELECT @@max_allowed_packet");
  if (rows.size() != 1 || rows[0].empty() || !rows[0][0])
    throw DbError(ErrorKind::kFatal, 0, "destination: cannot read @@max_allowed_packet");
  return std::stoull(*rows[0][0]);
}

size_t Destination::packet_bytes(const RowBuffer& row, size_t columns) {
  // Per value: its bytes, a length prefix of up to 9 bytes, 2 bytes of type and a bit of
  // the NULL bitmap (counted as a byte). Per row: its id in the queue_set_srcid() list.
  constexpr size_t kPerValue = 9 + 2 + 1, kPerRowId = 2 + 20;
  return row.value_bytes(columns) + columns * kPerValue + kPerRowId;
}

size_t Destination::max_rows_per_insert() const {
  return std::max<size_t>(1, std::min<size_t>(opt_.batch, kMaxPlaceholders / std::max<size_t>(1, param_count_)));
}

MYSQL_STMT* Destination::statement_for(size_t rows) {
  for (auto& s : statements_)
    if (s.first == rows) return s.second;
  // At most two: the full batch's statement, and the last other size.
  const size_t full = max_rows_per_insert();
  auto other = std::find_if(statements_.begin(), statements_.end(), [&](const auto& s) { return s.first != full; });
  if (rows != full && other != statements_.end()) {
    mysql_stmt_close(other->second);
    statements_.erase(other);
  }
  std::string sql = insert_head_ + row_marks_;
  for (size_t i = 1; i < rows; ++i) sql += ", " + row_marks_;
  MYSQL_STMT* stmt = mysql_stmt_init(conn_.handle());
  if (!stmt) conn_.fail("mysql_stmt_init");
  if (mysql_stmt_prepare(stmt, sql.data(), sql.size())) {
    try {
      conn_.fail(stmt, "prepare " + insert_head_ + row_marks_ + (rows > 1 ? ", ..." : ""));
    } catch (...) {
      mysql_stmt_close(stmt);
      throw;
    }
  }
  statements_.emplace_back(rows, stmt);
  return stmt;
}

size_t Destination::insert(RowBuffer* rows, size_t count, size_t columns, const uint64_t* ids) {
  if (columns != param_count_)
    throw DbError(ErrorKind::kFatal, 0, "destination: row has " + std::to_string(columns) + " columns, INSERT expects " +
                                            std::to_string(param_count_));
  // Mode 'a' always: 'w' would forget what was received and let a replay through.
  std::string declare = "SELECT queue_set_srcid(" + std::to_string(opt_.source_id) + ", 'a'";
  for (size_t i = 0; i < count; ++i) declare += ", " + std::to_string(ids[i]);
  conn_.execute(declare + ")");
  MYSQL_STMT* stmt = statement_for(count);
  std::vector<MYSQL_BIND> params;
  params.reserve(count * columns);
  for (size_t i = 0; i < count; ++i) rows[i].append_param_binds(columns, &params);
  const std::string what = count == 1 ? "INSERT of row " + std::to_string(ids[0])
                                      : "INSERT of rows " + std::to_string(ids[0]) + " to " + std::to_string(ids[count - 1]);
  if (mysql_stmt_bind_param(stmt, params.data())) conn_.fail(stmt, "binding the rows");
  replay_record_ = 0;
  if (mysql_stmt_execute(stmt)) conn_.fail(stmt, what);
  const bool none_inserted = mysql_stmt_affected_rows(stmt) == 0;
  // The note is read either way: it carries the record (replay_record()).
  const size_t noted = mysql_warning_count(conn_.handle()) == 0 ? 0 : dropped_per_warnings(count, ids);
  return none_inserted ? count : noted;
}

size_t Destination::dropped_per_warnings(size_t count, const uint64_t* ids) {
  // The engine reports dropped replays as inserted (Q4M compatible); an engine that also
  // adds a note naming queue_set_srcid lets us count replays and catch a misconfigured
  // source id. Other warnings mean the values were changed: log them.
  size_t dropped = 0;
  for (const SqlRow& w : conn_.query("SHOW WARNINGS")) {
    std::string text = w.size() > 2 ? w[2].value_or("") : "";
    size_t n = 0, of = 0;
    if (text.find("queue_set_srcid") != std::string::npos) {
      // "...: row R of source S was already received ..." (one row) or
      // "...: N of M rows of source S were already received ..." (a batch).
      dropped = sscanf(text.c_str(), "queue_set_srcid: %zu of %zu rows", &n, &of) == 2 ? std::min(n, count) : 1;
      // "...; dropped (last received: row R)": the record that made them replays.
      unsigned long long recorded = 0;
      const size_t at = text.rfind("(last received: row ");
      if (at != std::string::npos && sscanf(text.c_str() + at, "(last received: row %llu)", &recorded) == 1)
        replay_record_ = recorded;
    } else if (warnings_logged_ < kMaxLoggedWarnings) {
      ++warnings_logged_;
      log_line("destination: warning on INSERT of source rows %llu to %llu: %s %s: %s%s",
               static_cast<unsigned long long>(ids[0]), static_cast<unsigned long long>(ids[count - 1]),
               w[0].value_or("").c_str(), w[1].value_or("").c_str(), text.c_str(),
               warnings_logged_ == kMaxLoggedWarnings ? " (further warnings not logged)" : "");
    }
  }
  return dropped;
}

}  // namespace q4m::forward
