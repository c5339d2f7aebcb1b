// One connection to a MariaDB server (RAII over MYSQL*), raising DbError on failure.
#pragma once

#include <mysql.h>

#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace q4m::forward {

using SqlRow = std::vector<std::optional<std::string>>;

class Connection {
 public:
  explicit Connection(const char* role) : role_(role) {}
  ~Connection() { close(); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects (utf8mb4, UTC session time zone so TIMESTAMP values copy exactly).
  // read_timeout bounds every wait for the server's answer.
  void open(const Endpoint& ep, double connect_timeout, double read_timeout);
  void close();
  bool is_open() const { return mysql_ != nullptr; }
  MYSQL* handle() { return mysql_; }
  const char* role() const { return role_; }
  unsigned long server_thread_id() const { return thread_id_; }

  void execute(const std::string& sql);                // discards any result
  std::vector<SqlRow> query(const std::string& sql);   // text protocol, all rows
  std::string quote(const std::string& value);         // 'escaped literal'

  // Raises the DbError for the connection's (or statement's) last error, prefixed by context.
  [[noreturn]] void fail(const std::string& context);
  [[noreturn]] void fail(MYSQL_STMT* stmt, const std::string& context);

 private:
  const char* role_;  // "source" / "destination", for messages
  MYSQL* mysql_ = nullptr;
  unsigned long thread_id_ = 0;
};

std::string quote_identifier(const std::string& name);  // `name`

}  // namespace q4m::forward
