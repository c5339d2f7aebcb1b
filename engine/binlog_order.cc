#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <log.h>
#include <log_event.h>

#include "engine/binlog_order.h"

#include <fstream>
#include <string>
#include <vector>

namespace q4m_engine {

namespace {

// Appends the my_xid of each Xid event of `path`, in order; false if it cannot be read. The
// server's own reader: it checks checksums and decrypts an encrypted binary log
// (encrypt_binlog) from its Start_encryption event on, as the server's recovery does.
bool read_xids(const std::string& path, std::vector<uint64_t>* out) {
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
        continue;  // kept: it reads what follows
      case START_ENCRYPTION_EVENT:
        if (!format || format->start_decryption(static_cast<Start_encryption_log_event*>(ev))) ok = false;
        break;
      case XID_EVENT:
        out->push_back(static_cast<Xid_log_event*>(ev)->xid);
        break;
      default:
        break;
    }
    delete ev;
    if (!ok) break;
  }
  delete format;
  end_io_cache(&cache);
  mysql_file_close(file, MYF(0));
  return ok;
}

}  // namespace

std::unordered_map<uint64_t, uint64_t> binlog_commit_order(int files) {
  std::unordered_map<uint64_t, uint64_t> order;
  if (!opt_bin_log || !mysql_bin_log.get_index_fname() || !*mysql_bin_log.get_index_fname()) return order;
  std::ifstream index(mysql_bin_log.get_index_fname());
  std::vector<std::string> names;
  for (std::string line; std::getline(index, line);)
    if (!line.empty()) names.push_back(line);
  const size_t first = names.size() > static_cast<size_t>(files) ? names.size() - files : 0;
  std::vector<uint64_t> xids;
  for (size_t i = first; i < names.size(); i++)
    if (!read_xids(names[i], &xids)) return order;
  // query ids restart with each server run: the newest occurrence of an id is the crashed run's.
  for (size_t i = 0; i < xids.size(); i++) order[xids[i]] = i;
  return order;
}

}  // namespace q4m_engine
