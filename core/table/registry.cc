// TableRegistry: one open Table per data file path.
// The map lock is held only to find a slot; opening (recovery) holds just that
// table's slot lock, so a long recovery never blocks other tables.
#include "core/table/registry.h"

#include <unordered_map>

#include "core/file/data_file.h"
#include "core/file/format.h"
#include "core/util/guarded.h"
#include "core/file/index_snapshot.h"
#include "core/table/table.h"

namespace q4m {
namespace {

using Slot = Guarded<std::shared_ptr<Table>>;  // null until opened
using SlotMap = std::unordered_map<std::string, std::shared_ptr<Slot>>;

Guarded<SlotMap>& slots() {
  static Guarded<SlotMap> m;
  return m;
}

std::shared_ptr<Slot> find_slot(const std::string& path, bool create) {
  auto m = slots().lock();
  auto it = m->find(path);
  if (it != m->end()) return it->second;
  if (!create) return nullptr;
  auto slot = std::make_shared<Slot>();
  (*m)[path] = slot;
  return slot;
}

std::shared_ptr<Slot> take_slot(const std::string& path) {
  auto m = slots().lock();
  auto it = m->find(path);
  if (it == m->end()) return nullptr;
  auto slot = it->second;
  m->erase(it);
  return slot;
}

}  // namespace

TableRegistry& TableRegistry::instance() {
  static TableRegistry r;
  return r;
}

Status TableRegistry::create(const std::string& path) {
  if (file_exists(path)) return Status(ErrorCode::kExists, "file " + path + " already exists");
  take_slot(path);  // a stale entry for a file that vanished behind our back
  std::string contents = fmt::file_header();
  return write_file_atomically(path, contents, true);
}

Status TableRegistry::acquire(const std::string& path, std::shared_ptr<QueueTable>* out) {
  std::shared_ptr<Slot> slot = find_slot(path, true);
  auto table = slot->lock();
  if (!*table) {
    std::shared_ptr<Table> opened;
    Status s = Table::open(path, &opened);
    if (!s.ok()) {
      auto m = slots().lock();  // do not keep a slot for a table that failed to open
      auto it = m->find(path);
      if (it != m->end() && it->second == slot) m->erase(it);
      return s;
    }
    if (open_hook_) open_hook_(*opened);
    *table = opened;
  }
  *out = *table;
  return Status::Ok();
}

Status TableRegistry::drop(const std::string& path, bool rows_moved) {
  if (std::shared_ptr<Slot> slot = find_slot(path, false)) {
    std::shared_ptr<Table> open = *slot->lock();
    if (open && !rows_moved && !open->prepared_parts().empty())
      return Status(ErrorCode::kInvalid, "file " + path + ": DROP TABLE would lose prepared transaction parts (XA "
                                         "RECOVER lists them): end them with XA COMMIT or XA ROLLBACK first");
  }
  bool was_open = false;
  if (std::shared_ptr<Slot> slot = take_slot(path)) {
    auto table = slot->lock();
    if (*table) {
      (*table)->mark_dropped(rows_moved);
      was_open = true;
    }
    table->reset();
  }
  // Not open here: it may be open in another server (file_lock.h), which keeps it.
  std::shared_ptr<DataFile> held;
  if (!was_open) {
    Status s = DataFile::open(path, &held);
    if (s.code() == ErrorCode::kLocked) return s;
  }
  // Leftovers go even when the data file is already missing, or they outlive the table
  // (and a later table of the same name would find a stale snapshot).
  const bool data_missing = !was_open && !file_exists(path);
  remove_file(path + ".tmp");
  remove_file(index_snapshot_path(path));
  if (data_missing) return Status(ErrorCode::kNotFound, "file " + path + " does not exist");
  Status s = remove_file(path);
  if (s.ok()) s = sync_directory_of(path);
  return s;
}

Status TableRegistry::rename(const std::string& from, const std::string& to) {
  // A missing source comes first: the server's DDL recovery replays a rename that a crash
  // interrupted after the file moved, and it ignores "no such table" but not "exists".
  if (!file_exists(from)) return Status(ErrorCode::kNotFound, "file " + from + " does not exist");
  if (file_exists(to)) return Status(ErrorCode::kExists, "file " + to + " already exists");
  std::shared_ptr<Slot> slot = take_slot(from);
  std::shared_ptr<Table> table = slot ? *slot->lock() : nullptr;
  if (!table) {  // not open: a snapshot left by a clean close would name the old path
    std::shared_ptr<DataFile> held;  // unless another server has it open (file_lock.h)
    Status s = DataFile::open(from, &held);
    if (s.code() == ErrorCode::kLocked) return s;
    remove_file(index_snapshot_path(from));
    return rename_file(from, to);
  }
  Status s = table->rename_to(to);
  auto m = slots().lock();
  (*m)[s.ok() ? to : from] = slot;  // re-key; waiters and owners keep their table object
  return s;
}

std::vector<std::shared_ptr<QueueTable>> TableRegistry::open_tables() {
  std::vector<std::shared_ptr<Slot>> all;
  {
    auto m = slots().lock();
    for (auto& entry : *m) all.push_back(entry.second);
  }
  std::vector<std::shared_ptr<QueueTable>> out;
  for (auto& slot : all)
    if (auto table = *slot->lock()) out.push_back(table);
  return out;
}

void TableRegistry::close_all() {
  SlotMap all;
  all.swap(*slots().lock());
  for (auto& entry : all) {
    auto table = entry.second->lock();
    if (*table) (*table)->close();
  }
}

}  // namespace q4m
