#include "connection.h"

#include <errmsg.h>

#include <cmath>

#include "db_error.h"

namespace q4m::forward {
namespace {

unsigned whole_seconds(double s) { return static_cast<unsigned>(std::ceil(s < 1 ? 1 : s)); }

}  // namespace

std::string quote_identifier(const std::string& name) {
  std::string out = "`";
  for (char c : name) {
    if (c == '`') out += '`';
    out += c;
  }
  return out + "`";
}

void Connection::open(const Endpoint& ep, double connect_timeout, double read_timeout) {
  close();
  MYSQL* m = mysql_init(nullptr);
  if (!m) throw DbError(ErrorKind::kFatal, 0, std::string(role_) + ": out of memory");
  unsigned connect_s = whole_seconds(connect_timeout), read_s = whole_seconds(read_timeout);
  my_bool no = 0;
  mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
  mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &read_s);
  mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &connect_s);
  mysql_options(m, MYSQL_OPT_RECONNECT, &no);  // a silent reconnect would silently drop ownership
  mysql_options(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  if (!ep.defaults_file.empty()) {
    mysql_options(m, MYSQL_READ_DEFAULT_FILE, ep.defaults_file.c_str());
    mysql_options(m, MYSQL_READ_DEFAULT_GROUP, "client");
  }
  const char* host = ep.host.empty() ? nullptr : ep.host.c_str();
  const char* user = ep.user.empty() ? nullptr : ep.user.c_str();
  const char* password = ep.has_password ? ep.password.c_str() : nullptr;
  const char* socket = ep.socket.empty() ? nullptr : ep.socket.c_str();
  if (!mysql_real_connect(m, host, user, password, ep.db.c_str(), ep.port, socket, 0)) {
    unsigned code = mysql_errno(m);
    std::string message = std::string(role_) + ": cannot connect to " + ep.describe() + ": " + mysql_error(m);
    mysql_close(m);
    throw DbError(classify_error(code), code, message);
  }
  mysql_ = m;
  thread_id_ = mysql_thread_id(m);
  execute("SET SESSION time_zone = '+00:00'");
}

void Connection::close() {
  if (mysql_) mysql_close(mysql_);
  mysql_ = nullptr;
}

void Connection::fail(const std::string& context) {
  unsigned code = mysql_ ? mysql_errno(mysql_) : CR_SERVER_GONE_ERROR;
  std::string text = mysql_ ? mysql_error(mysql_) : "not connected";
  throw DbError(classify_error(code), code, std::string(role_) + ": " + context + ": " + text +
                                                " (error " + std::to_string(code) + ")");
}

void Connection::fail(MYSQL_STMT* stmt, const std::string& context) {
  unsigned code = mysql_stmt_errno(stmt);
  if (code == 0) fail(context);
  throw DbError(classify_error(code), code, std::string(role_) + ": " + context + ": " +
                                                mysql_stmt_error(stmt) + " (error " + std::to_string(code) + ")");
}

void Connection::execute(const std::string& sql) {
  if (!mysql_) fail(sql);
  if (mysql_real_query(mysql_, sql.data(), sql.size())) fail(sql);
  if (MYSQL_RES* res = mysql_store_result(mysql_)) mysql_free_result(res);
  else if (mysql_field_count(mysql_) != 0) fail(sql);
}

std::vector<SqlRow> Connection::query(const std::string& sql) {
  if (!mysql_) fail(sql);
  if (mysql_real_query(mysql_, sql.data(), sql.size())) fail(sql);
  MYSQL_RES* res = mysql_store_result(mysql_);
  if (!res) {
    if (mysql_field_count(mysql_) != 0) fail(sql);
    return {};
  }
  std::vector<SqlRow> rows;
  unsigned fields = mysql_num_fields(res);
  while (MYSQL_ROW row = mysql_fetch_row(res)) {
    unsigned long* lengths = mysql_fetch_lengths(res);
    SqlRow out(fields);
    for (unsigned i = 0; i < fields; ++i)
      if (row[i]) out[i] = std::string(row[i], lengths[i]);
    rows.push_back(std::move(out));
  }
  mysql_free_result(res);
  return rows;
}

std::string Connection::quote(const std::string& value) {
  std::string out(value.size() * 2 + 1, '\0');
  unsigned long n = mysql_real_escape_string(mysql_, &out[0], value.data(), value.size());
  out.resize(n);
  return "'" + out + "'";
}

}  // namespace q4m::forward
