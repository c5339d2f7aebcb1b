#include "machine_info.h"

#include <sys/utsname.h>

#include <fstream>
#include <thread>

namespace q4m::bench {

namespace {

std::string read_uname() {
  struct utsname u;
  if (uname(&u) != 0) return "unknown";
  return std::string(u.sysname) + " " + u.nodename + " " + u.release + " " + u.version + " " + u.machine;
}

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "unknown";
}

std::string read_load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

}  // namespace

std::string MachineInfo::line() const {
  return uname + " | CPU: " + cpu_model + " x " + std::to_string(cpus) + " | load: " + load_average +
         " | server: " + server_version;
}

MachineInfo collect_machine_info(client::DbConn& admin) {
  MachineInfo m;
  m.uname = read_uname();
  m.cpu_model = read_cpu_model();
  m.cpus = std::thread::hardware_concurrency();
  m.load_average = read_load_average();
  m.server_version = admin.scalar("SELECT VERSION()");
  client::DbResult r = admin.query(
      "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_buffer_pool_size', "
      "'innodb_log_file_size', 'innodb_flush_method', 'innodb_doublewrite', "
      "'log_bin', 'binlog_format', 'sync_binlog', 'thread_handling', 'max_connections')");
  while (MYSQL_ROW row = r.next())
    m.server_variables.emplace_back(row[0] ? row[0] : "", row[1] ? row[1] : "NULL");
  return m;
}

}  // namespace q4m::bench
