#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_plugin.h>
#include <handler.h>
#include <log.h>

#include "engine/tc_log_recovery.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace q4m_engine {

namespace {

// tc.log's first bytes (sql/log.cc tc_log_magic); the byte after them counts the engines.
constexpr unsigned char kMagic[] = {254, 0x23, 0x05, 0x74};

// Filled once, at init (single-threaded), read-only afterwards; consulted only until the
// run's first prepare (xids restart at every start: a new transaction's may equal an old one).
std::unordered_set<uint64_t> committed_xids;
std::atomic<bool> recovering{true};

std::string tc_log_path() {
  const std::string name = opt_tc_log_file ? opt_tc_log_file : "tc.log";
  if (!name.empty() && name[0] == '/') return name;
  std::string dir = mysql_real_data_home;
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir + name;
}

// The xids logged in the file: every non-zero 8-byte slot but the header's. (Page 0 holds the
// header, then its slots aligned to the page's end: on a machine page size of 4096 or more
// they start at byte 8, like every other page's at its start.)
bool read_logged_xids(const std::string& path, std::unordered_set<uint64_t>* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // no crash: a clean shutdown deletes the file
  std::vector<unsigned char> data;
  unsigned char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      close(fd);
      sql_print_error("QUEUE: cannot read %s for crash recovery: %s", path.c_str(), strerror(errno));
      return false;
    }
    if (n == 0) break;
    data.insert(data.end(), buf, buf + n);
  }
  close(fd);
  if (data.size() < 16 || memcmp(data.data(), kMagic, sizeof kMagic) != 0) return false;  // the server says why
  for (size_t off = 8; off + 8 <= data.size(); off += 8) {
    uint64_t x;
    memcpy(&x, data.data() + off, 8);
    if (x) out->insert(x);
  }
  return true;
}

// Commits, in `hton`, each prepared transaction whose server xid tc.log logged. Returns how many.
unsigned commit_logged(handlerton* hton) {
  constexpr uint kBatch = 4096;
  std::vector<XID> list(kBatch);
  unsigned committed = 0;
  for (;;) {
    const int got = hton->recover(hton, list.data(), kBatch);
    if (got <= 0) break;
    unsigned now = 0;
    for (int i = 0; i < got; i++) {
      const my_xid x = list[i].get_my_xid();
      if (x && committed_xids.count(x) && hton->commit_by_xid(hton, &list[i]) == 0) now++;
    }
    committed += now;
    // recover() lists what is still prepared: a full batch with nothing committed would list
    // the same again.
    if (static_cast<uint>(got) < kBatch || now == 0) break;
  }
  return committed;
}

std::atomic<bool> tc_log_synced{false};

}  // namespace

void read_tc_log() {
  if (opt_bin_log || tc_heuristic_recover) return;  // the binary log coordinates / an operator decides
  const std::string path = tc_log_path();
  if (!read_logged_xids(path, &committed_xids) || committed_xids.empty()) return;
  sql_print_information("QUEUE: %s from a crash logs %zu committed transaction(s): they are committed in every "
                        "engine that holds them prepared (MariaDB 10.11's own tc.log recovery rolls them back)",
                        path.c_str(), committed_xids.size());
}

void commit_logged_elsewhere(handlerton* self) {
  if (committed_xids.empty() || !recovering.load()) return;
  static std::once_flag once;
  std::call_once(once, [self] {
    for (uint slot = 0; slot < MAX_HA; slot++) {
      st_plugin_int* plugin = hton2plugin[slot];
      if (!plugin || !plugin->data) continue;
      handlerton* hton = static_cast<handlerton*>(plugin->data);
      if (hton == self || !hton->recover || !hton->commit_by_xid) continue;
      const unsigned n = commit_logged(hton);
      if (n)
        sql_print_information("QUEUE: committed %u prepared transaction(s) in %s that tc.log logged as committed",
                              n, plugin->name.str);
      if (n && hton->flush_logs) hton->flush_logs(hton);  // durable before tc.log forgets them
    }
  });
}

bool tc_log_committed(uint64_t my_xid) {
  return my_xid && recovering.load(std::memory_order_acquire) && committed_xids.count(my_xid) != 0;
}

void sync_tc_log_once() {
  if (tc_log_synced.load(std::memory_order_acquire)) return;
  static std::mutex m;
  std::lock_guard<std::mutex> one(m);
  if (tc_log_synced.load()) return;
  recovering.store(false, std::memory_order_release);  // a prepare: the startup's recovery is over
  if (opt_bin_log) {
    tc_log_synced.store(true, std::memory_order_release);
    return;
  }
  const int fd = open(tc_log_path().c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) {
    fdatasync(fd);
    close(fd);
  }
  tc_log_synced.store(true, std::memory_order_release);
}

}  // namespace q4m_engine
