// One SQL statement with `?` parameters, run over the text protocol (parameters spliced
// into the statement text, COM_QUERY) or as a server-side prepared statement (binary
// protocol, COM_STMT_EXECUTE: the server parses it once). Drivers differ in this: Go's
// database/sql and JDBC with useServerPrepStmts prepare, PyMySQL and PHP's defaults do not.
// Result columns are read as text either way, so callers decode one kind of row.
// Header-only, like db_conn.h.
#pragma once
#include <mysql.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "db_conn.h"

namespace q4m::client {

enum class Protocol { kText, kPrepared };

inline const char* protocol_name(Protocol p) { return p == Protocol::kText ? "text" : "prepared"; }

// A parameter: an unsigned integer or bytes (sent as a string literal / a blob).
struct Param {
  Param(uint64_t v) : is_int(true), u(v) {}
  Param(std::string_view v) : is_int(false), bytes(v) {}
  bool is_int;
  uint64_t u = 0;
  std::string_view bytes;
};

class DbStatement {
 public:
  DbStatement(DbConn& conn, std::string sql, Protocol protocol)
      : conn_(conn), sql_(std::move(sql)), protocol_(protocol) {
    if (protocol_ == Protocol::kPrepared) prepare();
  }
  DbStatement(const DbStatement&) = delete;
  DbStatement& operator=(const DbStatement&) = delete;
  ~DbStatement() {
    if (stmt_) mysql_stmt_close(stmt_);
  }

  const std::string& sql() const { return sql_; }

  // Runs the statement; its rows (if any) are then read with next(). Rows a caller did
  // not read are discarded by the next run().
  void run(std::initializer_list<Param> params) { run(params.begin(), params.size()); }
  void run(const Param* params, size_t count) {
    if (protocol_ == Protocol::kText)
      run_text(params, count);
    else
      run_prepared(params, count);
  }

  // The next row, or false at the end; row()/lengths() describe it (NULL: nullptr).
  bool next() {
    if (protocol_ == Protocol::kText) {
      text_row_ = text_result_.next();
      if (!text_row_) return false;
      text_lengths_ = text_result_.lengths();
      return true;
    }
    if (!executed_) return false;
    int rc = mysql_stmt_fetch(stmt_);
    if (rc == MYSQL_NO_DATA) {
      executed_ = false;
      return false;
    }
    if (rc == 1) fail();
    bool rebind = false;
    for (size_t i = 0; i < columns_.size(); ++i) {
      Column& c = columns_[i];
      if (c.is_null) {
        row_[i] = nullptr;
        continue;
      }
      if (c.length > c.buffer.size()) {  // MYSQL_DATA_TRUNCATED: fetch the whole value
        c.buffer.resize(c.length);
        MYSQL_BIND& b = result_binds_[i];
        b.buffer = c.buffer.data();
        b.buffer_length = c.buffer.size();
        if (mysql_stmt_fetch_column(stmt_, &b, static_cast<unsigned>(i), 0)) fail();
        rebind = true;
      }
      row_[i] = c.buffer.data();
      lengths_[i] = c.length;
    }
    // The statement keeps its own copy of the binds: give it the grown buffers.
    if (rebind && mysql_stmt_bind_result(stmt_, result_binds_.data())) fail();
    return true;
  }
  const char* const* row() const { return protocol_ == Protocol::kText ? text_row_ : row_.data(); }
  const unsigned long* lengths() const {
    return protocol_ == Protocol::kText ? text_lengths_ : lengths_.data();
  }

 private:
  struct Column {
    std::string buffer = std::string(64, '\0');
    unsigned long length = 0;
    my_bool is_null = 0;
    my_bool error = 0;
  };

  void run_text(const Param* params, size_t count) {
    text_sql_.clear();
    const Param* p = params;
    const Param* end = params + count;
    for (char ch : sql_) {
      if (ch != '?') {
        text_sql_.push_back(ch);
        continue;
      }
      if (p == end) throw DbError(0, "too few parameters for: " + sql_);
      if (p->is_int) {
        text_sql_.append(std::to_string(p->u));
      } else {
        text_sql_.push_back('\'');
        const size_t at = text_sql_.size();  // escaped straight into the statement text
        text_sql_.resize(at + p->bytes.size() * 2 + 1);
        text_sql_.resize(at + mysql_real_escape_string(conn_.raw(), &text_sql_[at], p->bytes.data(),
                                                       static_cast<unsigned long>(p->bytes.size())));
        text_sql_.push_back('\'');
      }
      ++p;
    }
    if (p != end) throw DbError(0, "too many parameters for: " + sql_);
    text_result_ = conn_.query(text_sql_);
  }

  void prepare() {
    stmt_ = mysql_stmt_init(conn_.raw());
    if (!stmt_) throw DbError(0, "mysql_stmt_init failed (out of memory)");
    if (mysql_stmt_prepare(stmt_, sql_.data(), static_cast<unsigned long>(sql_.size()))) fail();
    param_binds_.resize(mysql_stmt_param_count(stmt_));
    int_params_.resize(param_binds_.size());
    MYSQL_RES* meta = mysql_stmt_result_metadata(stmt_);
    const unsigned n = meta ? mysql_num_fields(meta) : 0;
    if (meta) mysql_free_result(meta);
    columns_.resize(n);
    result_binds_.assign(n, MYSQL_BIND{});
    row_.assign(n, nullptr);
    lengths_.assign(n, 0);
    for (unsigned i = 0; i < n; ++i) {  // every column as text, like the text protocol
      MYSQL_BIND& b = result_binds_[i];
      b.buffer_type = MYSQL_TYPE_STRING;
      b.buffer = columns_[i].buffer.data();
      b.buffer_length = columns_[i].buffer.size();
      b.length = &columns_[i].length;
      b.is_null = &columns_[i].is_null;
      b.error = &columns_[i].error;
    }
    if (n && mysql_stmt_bind_result(stmt_, result_binds_.data())) fail();
  }

  void run_prepared(const Param* params, size_t count) {
    if (count != param_binds_.size()) throw DbError(0, "wrong number of parameters for: " + sql_);
    if (executed_) mysql_stmt_free_result(stmt_);  // rows the caller left unread
    executed_ = false;
    for (size_t i = 0; i < count; ++i) {
      const Param& p = params[i];
      MYSQL_BIND& b = param_binds_[i];
      b = MYSQL_BIND{};
      if (p.is_int) {
        int_params_[i] = p.u;
        b.buffer_type = MYSQL_TYPE_LONGLONG;
        b.is_unsigned = 1;
        b.buffer = &int_params_[i];
      } else {
        b.buffer_type = MYSQL_TYPE_BLOB;
        b.buffer = const_cast<char*>(p.bytes.data());
        b.buffer_length = static_cast<unsigned long>(p.bytes.size());
      }
    }
    if (!param_binds_.empty() && mysql_stmt_bind_param(stmt_, param_binds_.data())) fail();
    if (mysql_stmt_execute(stmt_)) fail();
    executed_ = !columns_.empty();
    // Buffer the rows, as mysql_store_result does for text: the connection is then free for
    // the next statement even if the caller reads only the first row.
    if (executed_ && mysql_stmt_store_result(stmt_)) fail_reading_rows();
  }

  // An error after the result started (an InnoDB deadlock in a SKIP LOCKED claim, a
  // subquery that returns two rows for a later row) leaves Connector/C's statement waiting
  // for rows that will never come: the next execute or free_result of it then reads the
  // socket for them and breaks the connection ("Server has gone away"). mysql_stmt_reset
  // puts it back to "prepared"; the error is kept first, as the reset clears it.
  [[noreturn]] void fail_reading_rows() {
    DbError error = current_error();
    executed_ = false;
    mysql_stmt_reset(stmt_);
    throw error;
  }

  [[noreturn]] void fail() { throw current_error(); }

  DbError current_error() const {
    std::string shown = sql_.size() > 200 ? sql_.substr(0, 200) + "..." : sql_;
    return DbError(mysql_stmt_errno(stmt_), std::string(mysql_stmt_error(stmt_)) + " [in: " + shown + "]");
  }

  DbConn& conn_;
  const std::string sql_;
  const Protocol protocol_;
  // text protocol
  std::string text_sql_;
  DbResult text_result_{nullptr};
  MYSQL_ROW text_row_ = nullptr;
  const unsigned long* text_lengths_ = nullptr;
  // prepared
  MYSQL_STMT* stmt_ = nullptr;
  std::vector<MYSQL_BIND> param_binds_, result_binds_;
  std::vector<uint64_t> int_params_;
  std::vector<Column> columns_;
  std::vector<const char*> row_;
  std::vector<unsigned long> lengths_;
  bool executed_ = false;
};

}  // namespace q4m::client
