// One client session driven line by line from stdin, for what PyMySQL cannot send: the
// COM_RESET_CONNECTION and COM_CHANGE_USER that connection pools (ProxySQL, MaxScale,
// Connector/J, the MariaDB connectors' pools) use to clean a connection for its next user.
//   session_client SOCKET DB
// Each input line is one command, answered by one output line (flushed at once):
//   !reset        mysql_reset_connection()            -> "ok" or "error <errno> <message>"
//   !change_user  mysql_change_user(root, "", DB)     -> the same
//   any SQL       the first row's values, tab-separated ("NULL" for NULL), "none" for no
//                 row, "ok" for a statement with no result set, or "error <errno> <message>"
#include <mysql.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace {

void print_error(MYSQL* m) { std::printf("error %u %s\n", mysql_errno(m), mysql_error(m)); }

void run_query(MYSQL* m, const std::string& sql) {
  if (mysql_real_query(m, sql.data(), sql.size())) return print_error(m);
  MYSQL_RES* res = mysql_store_result(m);
  if (!res) {
    if (mysql_field_count(m) != 0) return print_error(m);
    std::printf("ok\n");
    return;
  }
  MYSQL_ROW row = mysql_fetch_row(res);
  if (!row) {
    std::printf("none\n");
  } else {
    for (unsigned i = 0; i < mysql_num_fields(res); i++)
      std::printf("%s%s", i ? "\t" : "", row[i] ? row[i] : "NULL");
    std::printf("\n");
  }
  mysql_free_result(res);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOCKET DB\n", argv[0]);
    return 2;
  }
  MYSQL* m = mysql_init(nullptr);
  if (!mysql_real_connect(m, nullptr, "root", "", argv[2], 0, argv[1], 0)) {
    print_error(m);
    return 1;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "!reset") {
      if (mysql_reset_connection(m)) print_error(m);
      else std::printf("ok\n");
    } else if (line == "!change_user") {
      if (mysql_change_user(m, "root", "", argv[2])) print_error(m);
      else std::printf("ok\n");
    } else {
      run_query(m, line);
    }
    std::fflush(stdout);
  }
  mysql_close(m);
  return 0;
}
