// Drives tools/common/db_statement.h (q4m-bench's statement class) for test_db_statement.py:
//   db_statement_client SOCKET DB text|prepared LIMIT...
// For each LIMIT, runs "SELECT id, (SELECT v FROM pairs WHERE pairs.g = items.g) FROM items
// WHERE id <= ? ORDER BY id" and prints its rows ("row ID V") or "error ERRNO", then runs
// "SELECT 1" on the same connection and prints "select1 ok" or "error ERRNO". A subquery that
// finds two rows fails the statement after its first rows were sent.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "db_statement.h"

using q4m::client::DbConn;
using q4m::client::DbError;
using q4m::client::DbStatement;
using q4m::client::Protocol;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s SOCKET DB text|prepared LIMIT...\n", argv[0]);
    return 2;
  }
  q4m::client::ConnParams params;
  params.socket = argv[1];
  params.db = argv[2];
  params.user = "root";
  params.read_timeout_s = 20;
  const Protocol protocol = std::strcmp(argv[3], "prepared") == 0 ? Protocol::kPrepared : Protocol::kText;
  try {
    DbConn conn(params);
    DbStatement items(conn,
                      "SELECT id, (SELECT v FROM pairs WHERE pairs.g = items.g) FROM items WHERE id <= ? ORDER BY id",
                      protocol);
    DbStatement select1(conn, "SELECT 1", protocol);
    for (int i = 4; i < argc; ++i) {
      try {
        items.run({static_cast<uint64_t>(std::strtoull(argv[i], nullptr, 10))});
        while (items.next()) std::printf("row %s %s\n", items.row()[0], items.row()[1] ? items.row()[1] : "NULL");
      } catch (const DbError& e) {
        std::printf("error %u\n", e.code());
      }
      try {
        select1.run({});
        std::printf(select1.next() && std::strcmp(select1.row()[0], "1") == 0 ? "select1 ok\n" : "select1 wrong\n");
      } catch (const DbError& e) {
        std::printf("error %u\n", e.code());
      }
    }
  } catch (const DbError& e) {
    std::printf("fatal %u %s\n", e.code(), e.what());
    return 1;
  }
  return 0;
}
