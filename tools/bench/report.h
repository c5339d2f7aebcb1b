// Human-readable tables and the --json document.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "machine_info.h"
#include "options.h"
#include "scenarios.h"

namespace q4m::bench {

struct Report {
  MachineInfo machine;
  std::vector<std::string> queue_sql;   // the statements each backend ran
  std::vector<std::string> innodb_sql;
  std::vector<std::string> txn_sql;     // the transactional scenarios' InnoDB tables (if run)
  bool binlog = false;                  // the server ran with the binary log
  std::vector<RunResult> runs;
  bool all_ok() const;
};

// One line per finished run, for progress on stderr.
std::string progress_line(const RunResult& r);
void print_tables(const Options& opt, const Report& rep, std::FILE* out);
void print_json(const Options& opt, const Report& rep, std::FILE* out);

}  // namespace q4m::bench
