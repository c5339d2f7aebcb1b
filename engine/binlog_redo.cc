#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <log.h>
#include <log_event.h>
#include <mysqld.h>

#include "engine/binlog_redo.h"

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/file/data_file.h"
#include "core/table/registry.h"
#include "core/util/guarded.h"
#include "engine/data_files.h"
#include "engine/sysvars.h"

namespace q4m_engine {

namespace {

constexpr char kPrefix[] = "SET @queue_redo = queue_apply_redo(";
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size()) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool unbase64(const std::string& in, std::string* out) {
  if (in.size() % 4) return false;
  out->clear();
  out->reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; k++) {
      const char c = in[i + k];
      const char* at = c ? std::strchr(kAlphabet, c) : nullptr;
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        pad++;
        v <<= 6;
        continue;
      }
      if (!at || pad) return false;
      v = v << 6 | static_cast<uint32_t>(at - kAlphabet);
    }
    out->push_back(static_cast<char>(v >> 16));
    if (pad < 2) out->push_back(static_cast<char>(v >> 8));
    if (pad < 1) out->push_back(static_cast<char>(v));
  }
  return true;
}

// As binlog_statements.cc quotes a name: quotes and backslashes escaped with a backslash.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

// Reads a literal quoted() made at *p; false if there is none.
bool read_quoted(const char** p, const char* end, std::string* out) {
  out->clear();
  if (*p >= end || **p != '\'') return false;
  for (const char* q = *p + 1; q < end; q++) {
    if (*q == '\\' && q + 1 < end) {
      out->push_back(*++q);
      continue;
    }
    if (*q == '\'') {
      *p = q + 1;
      return true;
    }
    out->push_back(*q);
  }
  return false;
}

struct LoggedRedo {
  std::string db, table;
  q4m::RedoPart part;
};

// A redo statement of this server's, or false.
bool parse_statement(const char* query, size_t length, LoggedRedo* out) {
  const size_t n = sizeof(kPrefix) - 1;
  if (length < n || memcmp(query, kPrefix, n) != 0) return false;
  const char* p = query + n;
  const char* end = query + length;
  std::string arg;
  if (!read_quoted(&p, end, &out->db) || p >= end || *p++ != ',' || !read_quoted(&p, end, &out->table) || p >= end ||
      *p++ != ',' || !read_quoted(&p, end, &arg))
    return false;
  uint32_t sid = 0;
  std::string error;
  if (!parse_redo_argument(arg, &sid, &out->part, &error)) {
    sql_print_warning("QUEUE: a redo statement of %s.%s in the binary log is not readable: %s", out->db.c_str(),
                      out->table.c_str(), error.c_str());
    return false;
  }
  return sid == server_id;
}

// Reads `path`'s events: the redo statements of transactions with an Xid event go to `out`;
// the name the last Binlog_checkpoint event names to *checkpoint (if given). False if the
// file cannot be opened or decrypted (a torn tail just ends it, as for the server).
bool read_file(const std::string& path, std::vector<LoggedRedo>* out, std::string* checkpoint, bool* in_use = nullptr) {
  IO_CACHE cache;
  const char* error = nullptr;
  const File file = open_binlog(&cache, path.c_str(), &error);
  if (file < 0) return false;
  Format_description_log_event first(BINLOG_VERSION);
  Format_description_log_event* format = nullptr;
  std::vector<LoggedRedo> pending;  // of the transaction being read
  bool ok = true;
  int read_error = 0;
  for (;;) {
    Log_event* ev = Log_event::read_log_event(&cache, &read_error, format ? format : &first, opt_master_verify_checksum);
    if (!ev) break;
    switch (ev->get_type_code()) {
      case FORMAT_DESCRIPTION_EVENT:
        delete format;
        format = static_cast<Format_description_log_event*>(ev);
        if (in_use) *in_use = (format->flags & LOG_EVENT_BINLOG_IN_USE_F) != 0;
        continue;
      case START_ENCRYPTION_EVENT:
        if (!format || format->start_decryption(static_cast<Start_encryption_log_event*>(ev))) ok = false;
        break;
      case BINLOG_CHECKPOINT_EVENT:
        if (checkpoint) {
          auto* c = static_cast<Binlog_checkpoint_log_event*>(ev);
          checkpoint->assign(c->binlog_file_name, c->binlog_file_len);
        }
        break;
      case GTID_EVENT:
        pending.clear();
        break;
      case QUERY_EVENT: {
        auto* q = static_cast<Query_log_event*>(ev);
        LoggedRedo r;
        if (q->is_commit() || q->is_rollback())
          pending.clear();
        else if (parse_statement(q->query, q->q_len, &r))
          pending.push_back(std::move(r));
        break;
      }
      case XID_EVENT:
        if (out)
          for (LoggedRedo& r : pending) out->push_back(std::move(r));
        pending.clear();
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

std::string file_part(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string redo_statement(const std::string& db, const std::string& table, const std::string& redo) {
  return kPrefix + quoted(db) + "," + quoted(table) + ",'" + std::to_string(server_id) + ":" + base64(redo) + "')";
}

bool parse_redo_argument(const std::string& text, uint32_t* sid, q4m::RedoPart* part, std::string* error) {
  const size_t colon = text.find(':');
  char* end = nullptr;
  const unsigned long long id = colon == std::string::npos ? 0 : strtoull(text.c_str(), &end, 10);
  std::string bytes;
  if (colon == std::string::npos || colon == 0 || end != text.c_str() + colon || id > UINT32_MAX ||
      !unbase64(text.substr(colon + 1), &bytes)) {
    *error = "expected '<server id>:<base64 of the redo>', got '" + text.substr(0, 64) + "'";
    return false;
  }
  *sid = static_cast<uint32_t>(id);
  return q4m::decode_redo(bytes, part, error);
}

void redo_from_files();

namespace {
constexpr const char* kRedoMarker = "./q4m_binlog_redo";
std::atomic<bool> redo_marker_made{false};
// The marker is written by one prepare at a time (redo_marker_made lets the later ones skip it).
q4m::Guarded<std::string> redo_marker_file(kRedoMarker);
}  // namespace

bool note_redo_in_use() {
  if (redo_marker_made.load(std::memory_order_acquire)) return true;
  auto path = redo_marker_file.lock();
  if (redo_marker_made.load()) return true;
  q4m::Status s = q4m::write_file_atomically(*path, "QUEUE prepares may be redone from the binary log\n", false);
  if (!s.ok()) {
    sql_print_warning("QUEUE: %s: %s; prepares keep their sync", kRedoMarker, s.message().c_str());
    return false;
  }
  redo_marker_made.store(true, std::memory_order_release);
  return true;
}

void redo_from_binary_log() {
  static bool done = false;
  if (done || mysqld_server_started) return;  // a crash recovery at startup only (not XA RECOVER)
  done = true;
  if (!q4m::file_exists(kRedoMarker)) return;  // no prepare went without its sync
  redo_from_files();
  // Left for a later start only while prepares may go unsynced again; SET GLOBAL
  // queue_binlog_redo = ON makes it anew before the first such prepare.
  if (!binlog_redo_enabled() && q4m::remove_file(kRedoMarker).ok()) redo_marker_made.store(false);
  else if (binlog_redo_enabled()) redo_marker_made.store(true);
}

void redo_from_files() {
  // A test's proof that the redo is needed (a power cut then loses acknowledged rows): only
  // with --queue-debug-hooks=ON.
  if (debug_hooks_enabled() && getenv("Q4M_DEBUG_SKIP_REDO")) {
    sql_print_warning("QUEUE: Q4M_DEBUG_SKIP_REDO: the redo from the binary log is skipped (a test hook)");
    return;
  }
  if (!opt_bin_log || !mysql_bin_log.get_index_fname() || !*mysql_bin_log.get_index_fname()) return;
  std::vector<std::string> names;
  {
    std::ifstream index(mysql_bin_log.get_index_fname());
    for (std::string line; std::getline(index, line);)
      if (!line.empty()) names.push_back(line);
  }
  if (names.empty()) return;
  // As the server's recovery: from the file the newest file's last Binlog_checkpoint names.
  std::string checkpoint;
  std::vector<LoggedRedo> redos;
  bool in_use = false;
  if (!read_file(names.back(), nullptr, &checkpoint, &in_use)) {
    sql_print_error("QUEUE: the binary log %s could not be read for QUEUE's redo", names.back().c_str());
    return;
  }
  // Closed cleanly (the server's own test for a crash recovery): the shutdown synced every
  // QUEUE file, and the server commits nothing from the binary log now (10.11 calls recover()
  // at every start, without a commit list then).
  if (!in_use) return;
  size_t from = names.size() - 1;
  if (!checkpoint.empty())
    for (size_t i = 0; i < names.size(); i++)
      if (file_part(names[i]) == file_part(checkpoint)) from = i;
  for (size_t i = from; i < names.size(); i++) {
    if (!read_file(names[i], &redos, nullptr)) {
      sql_print_error("QUEUE: the binary log %s could not be read for QUEUE's redo", names[i].c_str());
      return;
    }
  }
  if (redos.empty()) return;
  std::map<std::pair<std::string, std::string>, std::vector<q4m::RedoPart>> by_table;
  for (LoggedRedo& r : redos) by_table[{r.db, r.table}].push_back(std::move(r.part));
  for_each_data_file([&](const std::string& db, const std::string& name, const std::string& path) {
    auto it = by_table.find({db, name});
    if (it == by_table.end()) return true;
    size_t appended = 0;
    q4m::Status s = q4m::redo_parts(path, std::move(it->second), &appended);
    if (!s.ok()) {
      sql_print_error("QUEUE: table %s.%s: redo from the binary log failed: %s", db.c_str(), name.c_str(),
                      s.message().c_str());
      return true;
    }
    if (appended == 0) return true;
    sql_print_information("QUEUE: table %s.%s: %zu prepared part(s) a power cut lost redone from the binary log",
                          db.c_str(), name.c_str(), appended);
    std::shared_ptr<q4m::QueueTable> table;  // opened: recover() lists its prepared parts
    s = q4m::TableRegistry::instance().acquire(path, &table);
    if (!s.ok())
      sql_print_warning("QUEUE: table %s.%s not opened for recovery: %s", db.c_str(), name.c_str(), s.message().c_str());
    return true;
  });
}

}  // namespace q4m_engine
