// One client connection to MariaDB (Connector/C) for q4m-bench. Header-only because each
// tool is built from its own directory's .cc files. q4m-forward keeps its own Connection
// (tools/forward/connection.h): it classifies every error for retry-or-exit, disables
// reconnects and pins the session time zone, none of which a benchmark wants.
// Errors are exceptions (DbError) carrying the server error number, so callers
// can tell a lost connection from an SQL error.
#pragma once
#include <mysql.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace q4m::client {

struct ConnParams {
  std::string host = "localhost";
  unsigned port = 0;
  std::string socket;  // empty: library default (or TCP when host is not localhost)
  std::string user = "root";
  std::string password;
  std::string db;
  // A statement that does not answer within this many seconds fails (0 = never):
  // turns a hung server into an error instead of a hung client.
  unsigned read_timeout_s = 0;
};

class DbError : public std::runtime_error {
 public:
  DbError(unsigned code, const std::string& what) : std::runtime_error(what), code_(code) {}
  unsigned code() const { return code_; }

 private:
  unsigned code_;
};

// Owns a MYSQL_RES; rows are read with next().
class DbResult {
 public:
  explicit DbResult(MYSQL_RES* res) : res_(res) {}
  DbResult(DbResult&& o) noexcept : res_(std::exchange(o.res_, nullptr)) {}
  DbResult& operator=(DbResult&& o) noexcept {
    if (this != &o) {
      if (res_) mysql_free_result(res_);
      res_ = std::exchange(o.res_, nullptr);
    }
    return *this;
  }
  DbResult(const DbResult&) = delete;
  DbResult& operator=(const DbResult&) = delete;
  ~DbResult() {
    if (res_) mysql_free_result(res_);
  }

  bool has_rows() const { return res_ != nullptr; }
  uint64_t row_count() const { return res_ ? mysql_num_rows(res_) : 0; }
  unsigned field_count() const { return res_ ? mysql_num_fields(res_) : 0; }

  // Next row, or nullptr at the end. lengths() describes the row just returned.
  MYSQL_ROW next() { return res_ ? mysql_fetch_row(res_) : nullptr; }
  const unsigned long* lengths() const { return mysql_fetch_lengths(res_); }

 private:
  MYSQL_RES* res_;
};

class DbConn {
 public:
  DbConn() = default;
  explicit DbConn(const ConnParams& p) { connect(p); }
  DbConn(DbConn&& o) noexcept : mysql_(std::exchange(o.mysql_, nullptr)) {}
  DbConn& operator=(DbConn&& o) noexcept {
    if (this != &o) {
      close();
      mysql_ = std::exchange(o.mysql_, nullptr);
    }
    return *this;
  }
  DbConn(const DbConn&) = delete;
  DbConn& operator=(const DbConn&) = delete;
  ~DbConn() { close(); }

  void connect(const ConnParams& p) {
    close();
    mysql_ = mysql_init(nullptr);
    if (!mysql_) throw DbError(0, "mysql_init failed (out of memory)");
    unsigned connect_timeout = 10;
    mysql_optionsv(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
    if (p.read_timeout_s) {
      mysql_optionsv(mysql_, MYSQL_OPT_READ_TIMEOUT, &p.read_timeout_s);
      mysql_optionsv(mysql_, MYSQL_OPT_WRITE_TIMEOUT, &p.read_timeout_s);
    }
    if (!p.socket.empty()) {
      unsigned proto = MYSQL_PROTOCOL_SOCKET;
      mysql_optionsv(mysql_, MYSQL_OPT_PROTOCOL, &proto);
    }
    if (!mysql_real_connect(mysql_, p.host.c_str(), p.user.c_str(), p.password.c_str(),
                            p.db.empty() ? nullptr : p.db.c_str(), p.port,
                            p.socket.empty() ? nullptr : p.socket.c_str(), 0)) {
      DbError err(mysql_errno(mysql_), "connect to " + describe(p) + ": " + mysql_error(mysql_));
      close();
      throw err;
    }
  }

  void close() {
    if (mysql_) mysql_close(mysql_);
    mysql_ = nullptr;
  }

  bool connected() const { return mysql_ != nullptr; }
  MYSQL* raw() { return mysql_; }

  // Runs a statement and discards any result set.
  void exec(const std::string& sql) { DbResult r = query(sql); }

  // Runs a statement; the whole result set is fetched (mysql_store_result).
  DbResult query(const std::string& sql) {
    if (mysql_real_query(mysql_, sql.data(), sql.size()) != 0) fail(sql);
    MYSQL_RES* res = mysql_store_result(mysql_);
    if (!res && mysql_field_count(mysql_) != 0) fail(sql);
    return DbResult(res);
  }

  // First column of the first row as text; `fallback` when there is no row or it is NULL.
  std::string scalar(const std::string& sql, const std::string& fallback = "") {
    DbResult r = query(sql);
    MYSQL_ROW row = r.next();
    if (!row || !row[0]) return fallback;
    return std::string(row[0], r.lengths()[0]);
  }

  uint64_t scalar_u64(const std::string& sql) {
    std::string s = scalar(sql, "0");
    return std::stoull(s);
  }

  static std::string describe(const ConnParams& p) {
    std::string who = p.user + "@";
    if (!p.socket.empty()) return who + p.socket;
    return who + p.host + (p.port ? ":" + std::to_string(p.port) : "");
  }

 private:
  [[noreturn]] void fail(const std::string& sql) {
    std::string shown = sql.size() > 200 ? sql.substr(0, 200) + "..." : sql;
    throw DbError(mysql_errno(mysql_), std::string(mysql_error(mysql_)) + " [in: " + shown + "]");
  }

  MYSQL* mysql_ = nullptr;
};

}  // namespace q4m::client
