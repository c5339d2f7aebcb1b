#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <mysqld.h>
#include <log.h>

#include "engine/orphan_parts.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "core/table/queue_table.h"
#include "core/table/registry.h"
#include "engine/binlog_order.h"
#include "engine/xa.h"

namespace q4m_engine {

namespace {

// Binary log files read back: a torn end is found at the first open after the damage, which
// is normally the first open since the last clean shutdown.
constexpr int kBinlogFiles = 3;

std::vector<q4m::QueueTable::PreparedPartInfo> orphans_of(q4m::QueueTable& t) {
  std::vector<q4m::QueueTable::PreparedPartInfo> out;
  for (const auto& part : t.prepared_parts())
    if (internal_xid(part.xid) != 0) out.push_back(part);
  return out;
}

}  // namespace

void end_orphaned_parts(q4m::QueueTable& opened) {
  // Before the server is up, its crash recovery asks for the prepared parts (xa.cc recover())
  // and decides each. After it, a part of the server's own transactions in a table opened now
  // is from an earlier run (a live transaction's tables are open): nobody else will end it.
  if (!mysqld_server_started) return;
  const std::vector<q4m::QueueTable::PreparedPartInfo> orphans = orphans_of(opened);
  if (orphans.empty()) return;
  std::unordered_set<uint64_t> committed;
  if (!xids_of_earlier_runs(kBinlogFiles, &committed)) {
    sql_print_warning("QUEUE: %s holds %zu prepared part(s) of statements whose end record is not in the file "
                      "(a torn end of file) and the binary log cannot tell their outcome (it is off or unreadable): "
                      "left prepared; DROP TABLE discards them",
                      opened.path().c_str(), orphans.size());
    return;
  }
  for (const auto& part : orphans) {
    const unsigned long long xid = internal_xid(part.xid);
    const bool commit = committed.count(xid) != 0;
    const q4m::Status s = opened.end_part(part.id, commit);
    if (!s.ok()) {
      sql_print_error("QUEUE: %s: ending the prepared part of transaction %llu, whose end record was lost, failed: %s",
                      opened.path().c_str(), xid, s.message().c_str());
      continue;
    }
    sql_print_warning("QUEUE: %s: the end record of transaction %llu's prepared part was not in the file (a torn "
                      "end of file): %s",
                      opened.path().c_str(), xid,
                      commit ? "committed, as the binary log has its Xid event"
                             : "rolled back, as no binary log file of an earlier run has its Xid event");
  }
}

void discard_orphaned_parts_for_drop(const std::string& path) {
  for (const auto& table : q4m::TableRegistry::instance().open_tables()) {
    if (table->path() != path) continue;
    const std::vector<q4m::QueueTable::PreparedPartInfo> orphans = orphans_of(*table);
    for (const auto& part : orphans) table->end_part(part.id, false);
    if (orphans.empty()) return;
    const std::string what = "DROP TABLE discarded " + std::to_string(orphans.size()) +
                             " prepared transaction part(s) of " + path +
                             " that no recovery or XA command could end (their end record was lost and the binary "
                             "log could not tell their outcome): the rows they inserted and the removals they made "
                             "are lost with the table";
    sql_print_warning("QUEUE: %s", what.c_str());
    if (THD* thd = current_thd) push_warning(thd, Sql_condition::WARN_LEVEL_WARN, ER_UNKNOWN_ERROR, what.c_str());
    return;
  }
}

}  // namespace q4m_engine
