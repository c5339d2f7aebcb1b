// What the numbers were measured on: the client machine and the server.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "../common/db_conn.h"

namespace q4m::bench {

struct MachineInfo {
  std::string uname;      // like `uname -a`
  std::string cpu_model;  // /proc/cpuinfo "model name"
  unsigned cpus = 0;
  std::string load_average;  // /proc/loadavg at start: other work on the box skews results
  std::string server_version;
  std::vector<std::pair<std::string, std::string>> server_variables;  // the settings that matter here
  std::string line() const;  // one line for the report
};

MachineInfo collect_machine_info(client::DbConn& admin);

}  // namespace q4m::bench
