// TableRegistry: the one open QueueTable per data file path, shared by all handlers
// and consumers. Paths are the data file paths the engine builds (".../db/t.Q4M").
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/table/queue_table.h"
#include "core/util/status.h"

namespace q4m {

constexpr const char* kDataFileExtension = ".Q4M";

class TableRegistry {
 public:
  static TableRegistry& instance();

  Status create(const std::string& path);  // new empty data file (kExists if present)
  // Opens (with crash recovery) or returns the already open table.
  Status acquire(const std::string& path, std::shared_ptr<QueueTable>* out);
  // Called with each table this process opens, before anyone else gets it (the engine ends
  // there the prepared parts no recovery will end, engine/orphan_parts.h). Set once, at startup.
  using OpenHook = void (*)(QueueTable& opened);
  void set_open_hook(OpenHook hook) { open_hook_ = hook; }
  // Drop: waiters on it return kDropped, owned rows vanish, the file is deleted. `rows_moved`:
  // a copying ALTER TABLE moved the rows to another table (Table::mark_dropped).
  Status drop(const std::string& path, bool rows_moved = false);
  Status rename(const std::string& from, const std::string& to);
  // Plugin unload / server shutdown: close every table cleanly (fast next open).
  void close_all();
  // Every table open now (two-phase commit looks for prepared parts in them).
  std::vector<std::shared_ptr<QueueTable>> open_tables();

 private:
  OpenHook open_hook_ = nullptr;
};

}  // namespace q4m
