// A consumer that uses the binary protocol (server-side prepared statements), as JDBC with
// useServerPrepStmts, Go's database/sql or PDO without emulation do. For test_prepared.py.
//   ps_consumer SOCKET DB TABLE COUNT TIMEOUT [end|keep]
// Prepares "SELECT v FROM <TABLE> WHERE queue_wait(?, ?)" once, executes it COUNT times
// with (TABLE, TIMEOUT) bound, and prints one line per execution: the v it returned, or
// "none". Then, with "end" (the default), runs the prepared "SELECT queue_end()" when it
// still owns a row; with "keep" it prints "holding" and waits for stdin to close first.
// An SQL error prints "error <errno> <message>" and exits 1.
#include <mysql.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

[[noreturn]] void die_stmt(MYSQL_STMT* st) {
  std::printf("error %u %s\n", mysql_stmt_errno(st), mysql_stmt_error(st));
  std::exit(1);
}

MYSQL_STMT* prepare(MYSQL* m, const std::string& sql) {
  MYSQL_STMT* st = mysql_stmt_init(m);
  if (!st || mysql_stmt_prepare(st, sql.data(), sql.size())) die_stmt(st);
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s SOCKET DB TABLE COUNT TIMEOUT [end|keep]\n", argv[0]);
    return 2;
  }
  const std::string table = argv[3];
  const int count = std::atoi(argv[4]);
  double timeout = std::atof(argv[5]);
  const bool keep = argc > 6 && std::strcmp(argv[6], "keep") == 0;

  MYSQL* m = mysql_init(nullptr);
  if (!mysql_real_connect(m, nullptr, "root", "", argv[2], 0, argv[1], 0)) {
    std::printf("error %u %s\n", mysql_errno(m), mysql_error(m));
    return 1;
  }
  MYSQL_STMT* wait = prepare(m, "SELECT v FROM " + table + " WHERE queue_wait(?, ?)");

  MYSQL_BIND params[2];
  std::memset(params, 0, sizeof params);
  unsigned long table_len = table.size();
  params[0].buffer_type = MYSQL_TYPE_STRING;
  params[0].buffer = const_cast<char*>(table.data());
  params[0].buffer_length = table_len;
  params[0].length = &table_len;
  params[1].buffer_type = MYSQL_TYPE_DOUBLE;
  params[1].buffer = &timeout;
  if (mysql_stmt_bind_param(wait, params)) die_stmt(wait);

  long long v = 0;
  MYSQL_BIND result;
  std::memset(&result, 0, sizeof result);
  result.buffer_type = MYSQL_TYPE_LONGLONG;
  result.buffer = &v;
  if (mysql_stmt_bind_result(wait, &result)) die_stmt(wait);

  bool owning = false;
  for (int i = 0; i < count; i++) {
    if (mysql_stmt_execute(wait) || mysql_stmt_store_result(wait)) die_stmt(wait);
    int rows = 0;
    while (mysql_stmt_fetch(wait) == 0) {
      std::printf("%lld\n", v);
      rows++;
    }
    if (rows == 0) std::printf("none\n");
    if (rows > 1) std::printf("error 0 %d rows from one wait\n", rows);
    owning = rows > 0;
    mysql_stmt_free_result(wait);
  }
  std::fflush(stdout);
  if (keep && owning) {
    std::printf("holding\n");
    std::fflush(stdout);
    while (std::getchar() != EOF) {
    }
  }
  if (!keep && owning) {
    MYSQL_STMT* end = prepare(m, "SELECT queue_end()");
    if (mysql_stmt_execute(end) || mysql_stmt_store_result(end)) die_stmt(end);
    mysql_stmt_close(end);
  }
  mysql_stmt_close(wait);
  mysql_close(m);
  return 0;
}
