#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <log.h>
#include <log_event.h>

#include "engine/binlog_order.h"

#include <fstream>
#include <unordered_set>
#include <string>
#include <vector>

namespace q4m_engine {

namespace {

// Appends the my_xid of each Xid event of `path`, in order; false if it cannot be read. The
// server's own reader: it checks checksums and decrypts an encrypted binary log
// (encrypt_binlog) from its Start_encryption event on, as the server's recovery does.
// `run_start` (if given): set to whether the file is the first of a server run (its format
// description has a creation time; a file opened by a rotation has none); with `out` null,
// only that is read.
bool read_xids(const std::string& path, std::vector<uint64_t>* out, bool* run_start = nullptr) {
  IO_CACHE cache;
  const char* error = nullptr;
  const File file = open_binlog(&cache, path.c_str(), &error);
  if (file < 0) return false;
  Format_description_log_event first(BINLOG_VERSION);
  Format_description_log_event* format = nullptr;
  bool ok = true;
  int read_error = 0;
  for (;;) {
    Log_event* ev = Log_event::read_log_event(&cache, &read_error, format ? format : &first,
                                              opt_master_verify_checksum);
    if (!ev) break;  // the end, or a torn tail
    switch (ev->get_type_code()) {
      case FORMAT_DESCRIPTION_EVENT:
        delete format;
        format = static_cast<Format_description_log_event*>(ev);
        if (run_start) *run_start = format->created != 0;
        if (!out) break;
        continue;  // kept: it reads what follows
      case START_ENCRYPTION_EVENT:
        if (!format || format->start_decryption(static_cast<Start_encryption_log_event*>(ev))) ok = false;
        break;
      case XID_EVENT:
        if (out) out->push_back(static_cast<Xid_log_event*>(ev)->xid);
        break;
      default:
        break;
    }
    if (!out && ev == format) break;  // only the format description was asked for
    delete ev;
    if (!ok) break;
  }
  delete format;
  end_io_cache(&cache);
  mysql_file_close(file, MYF(0));
  return ok;
}

// The binary log files the index lists, oldest first (none without a binary log).
std::vector<std::string> binlog_files() {
  std::vector<std::string> names;
  if (!opt_bin_log || !mysql_bin_log.get_index_fname() || !*mysql_bin_log.get_index_fname()) return names;
  std::ifstream index(mysql_bin_log.get_index_fname());
  for (std::string line; std::getline(index, line);)
    if (!line.empty()) names.push_back(line);
  return names;
}

}  // namespace

bool xids_of_earlier_runs(int files, std::unordered_set<uint64_t>* out) {
  const std::vector<std::string> names = binlog_files();
  if (names.empty()) return false;
  // This run's files: from the newest one that starts a run.
  size_t first_of_run = names.size();
  while (first_of_run > 0) {
    bool run_start = false;
    if (!read_xids(names[first_of_run - 1], nullptr, &run_start)) return false;
    first_of_run--;
    if (run_start) break;
  }
  std::vector<uint64_t> xids;
  const size_t from = first_of_run > static_cast<size_t>(files) ? first_of_run - files : 0;
  for (size_t i = from; i < first_of_run; i++)
    if (!read_xids(names[i], &xids)) return false;
  out->insert(xids.begin(), xids.end());
  return true;
}

std::unordered_map<uint64_t, uint64_t> binlog_commit_order(int files) {
  std::unordered_map<uint64_t, uint64_t> order;
  const std::vector<std::string> names = binlog_files();
  const size_t first = names.size() > static_cast<size_t>(files) ? names.size() - files : 0;
  std::vector<uint64_t> xids;
  for (size_t i = first; i < names.size(); i++)
    if (!read_xids(names[i], &xids)) return order;
  // query ids restart with each server run: the newest occurrence of an id is the crashed run's.
  for (size_t i = 0; i < xids.size(); i++) order[xids[i]] = i;
  return order;
}

}  // namespace q4m_engine
