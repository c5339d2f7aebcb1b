// Global server variables a benchmark changes, each remembered before its first change and
// put back at the end, so that the server is left as it was found.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "../common/db_conn.h"

namespace q4m::bench {

class SavedGlobals {
 public:
  // SET GLOBAL name = value (`value` as SQL: a number or a quoted string), remembering the
  // variable's value the first time.
  void set(client::DbConn& admin, const std::string& name, const std::string& value);
  void restore(client::DbConn& admin);

 private:
  std::vector<std::pair<std::string, std::string>> saved_;  // (name, value found)
};

}  // namespace q4m::bench
