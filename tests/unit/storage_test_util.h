// Helpers shared by the storage unit tests: a fresh temp directory per test and
// short ways to open tables and consume rows.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/table/consumer.h"
#include "core/table/queue_table.h"
#include "core/util/settings.h"
#include "core/table/registry.h"
#include "core/table/transaction.h"

namespace q4m_test {

// A new empty directory under /tmp, removed (with its files) when the object dies.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/q4m-unit-XXXXXX";
    char* d = ::mkdtemp(tmpl);
    path_ = d ? d : "/tmp";
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  std::string file(const std::string& name) const { return path_ + "/" + name + q4m::kDataFileExtension; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Rows of (<key_name> VARCHAR NULL, label VARCHAR NOT NULL) whose first column is the
// table's KeyColumn (MESSAGE_GROUP_COLUMN, DEDUP_COLUMN): one null-flag byte, the key's is bit 1.
inline std::shared_ptr<const q4m::KeyColumn> key_label_column(const std::string& key_name) {
  auto c = std::make_shared<q4m::KeyColumn>();
  c->schema.table_name = "test.jobs";
  c->schema.null_bytes = 1;
  c->schema.columns = {q4m::ColumnInfo{key_name, q4m::ColumnKind::kVarchar, 0, false, 0, 0, 2},
                       q4m::ColumnInfo{"label", q4m::ColumnKind::kVarchar, 0, false, 0, 0, 0}};
  c->column = 0;
  return c;
}

// The payload of such a row labelled `label` with key `key` ("" = NULL: no key).
inline std::string key_label_row(const std::string& key, const std::string& label) {
  std::string out;
  q4m::RowPayloadWriter w(&out);
  w.begin(std::string(1, key.empty() ? '\x02' : '\x00'));
  if (!key.empty()) w.add(key);
  w.add(label);
  return out;
}

// The label of such a row ("?" if it does not decode).
inline std::string key_label_of(const std::string& payload) {
  std::vector<q4m::RowPayloadView::Column> cols;
  return q4m::RowPayloadView::decode(key_label_column("key")->schema, payload, &cols) ? std::string(cols[1].bytes)
                                                                                     : "?";
}

// Changes one of t's options (QueueTable::configure), keeping the others.
template <typename T, typename V>
void set_option(q4m::QueueTable& t, T q4m::TableOptions::*field, V value) {
  auto o = std::make_shared<q4m::TableOptions>(*t.options());
  (*o).*field = value;
  t.configure(o);
}

// DEDUP_COLUMN and DEDUP_WINDOW together.
inline void set_dedup(q4m::QueueTable& t, std::shared_ptr<const q4m::KeyColumn> column,
                      std::chrono::milliseconds window) {
  auto o = std::make_shared<q4m::TableOptions>(*t.options());
  o->dedup = std::move(column);
  o->dedup_window = window;
  t.configure(o);
}

inline std::shared_ptr<q4m::QueueTable> create_and_open(const std::string& path) {
  auto& reg = q4m::TableRegistry::instance();
  if (!reg.create(path).ok()) return nullptr;
  std::shared_ptr<q4m::QueueTable> t;
  if (!reg.acquire(path, &t).ok()) return nullptr;
  return t;
}

inline std::shared_ptr<q4m::QueueTable> reopen(const std::string& path, q4m::Status* status = nullptr) {
  auto& reg = q4m::TableRegistry::instance();
  reg.close_all();
  std::shared_ptr<q4m::QueueTable> t;
  q4m::Status s = reg.acquire(path, &t);
  if (status) *status = s;
  return s.ok() ? t : nullptr;
}

inline q4m::Status insert1(q4m::QueueTable& t, const std::string& row, q4m::RowId* id = nullptr) {
  std::vector<std::string_view> rows{row};
  std::vector<q4m::RowId> ids;
  q4m::Status s = t.insert(rows, &ids);
  if (id && s.ok()) *id = ids.at(0);
  return s;
}

// A new table at `path` holding `rows` in order (their ids in *ids); null if that failed.
inline std::shared_ptr<q4m::QueueTable> table_with(const std::string& path, std::initializer_list<const char*> rows,
                                                   std::vector<q4m::RowId>* ids = nullptr) {
  auto t = create_and_open(path);
  for (const char* r : rows) {
    q4m::RowId id = 0;
    if (!t || !insert1(*t, r, &id).ok()) return nullptr;
    if (ids) ids->push_back(id);
  }
  return t;
}

// Inserts rows given as "key:label" (key_label_row; "" key = NULL), one statement each, their
// ids by label in *ids.
inline q4m::Status insert_key_label_rows(q4m::QueueTable& t, std::initializer_list<const char*> specs,
                                         std::map<std::string, q4m::RowId>* ids = nullptr) {
  for (const char* r : specs) {
    const std::string spec = r;
    const size_t colon = spec.find(':');
    q4m::RowId id = 0;
    q4m::Status s = insert1(t, key_label_row(spec.substr(0, colon), spec.substr(colon + 1)), &id);
    if (!s.ok()) return s;
    if (ids) (*ids)[spec.substr(colon + 1)] = id;
  }
  return q4m::Status::Ok();
}

// The label of the key_label_row `c` takes from `t` now (waiting up to `timeout`), "" if none.
inline std::string take_key_label(q4m::Consumer& c, const std::shared_ptr<q4m::QueueTable>& t,
                                  std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                                  std::shared_ptr<const q4m::RowFilter> filter = nullptr) {
  int idx = 0;
  if (!c.wait({{t, filter}}, timeout, &idx).ok() || idx != 1) return "";
  std::string payload;
  bool found = false;
  if (!t->read_row(c.owned_rowid(), &payload, &found).ok() || !found) return "?";
  return key_label_of(payload);
}

// Until `n` consumers sleep in a wait on `t` (at most 10 s: a wait that took a row at once
// must fail the test, not hang it).
inline void wait_for_waiters(q4m::QueueTable& t, uint64_t n = 1) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (t.info().waiters < n && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// One relayed row (queue_set_srcid with one row id); *accepted = it was not dropped.
inline q4m::Status relay1(q4m::QueueTable& t, const std::string& row, uint32_t source_id, q4m::RowId source_rowid,
                          bool reset, bool* accepted) {
  std::vector<std::string_view> rows{row};
  size_t dropped = 0;
  q4m::Status s = t.insert_relayed(rows, source_id, &source_rowid, reset, &dropped);
  *accepted = s.ok() && dropped == 0;
  return s;
}

// All visible rows (id, payload) as seen by `viewer`.
inline std::vector<std::pair<q4m::RowId, std::string>> scan(q4m::QueueTable& t,
                                                            const q4m::Consumer* viewer = nullptr) {
  std::vector<std::pair<q4m::RowId, std::string>> out;
  q4m::RowId after = 0, id = 0;
  std::string payload;
  bool found = true;
  while (t.next_visible(viewer, after, &id, &payload, &found).ok() && found) {
    out.emplace_back(id, payload);
    after = id;
  }
  return out;
}

// Copies every live row of `from` into `to` with its history (id, age, deliveries, retry
// delay, whether it is owned), as the engine's copying ALTER TABLE does before take_over().
inline q4m::Status copy_rows(q4m::QueueTable& from, q4m::QueueTable& to) {
  std::vector<std::string> rows;
  std::vector<q4m::RowHistory> history;
  q4m::RowId after = 0, id = 0;
  std::string payload;
  bool found = false;
  q4m::RowHistory h;
  while (from.next_row(after, &id, &payload, &found, &h).ok() && found) {
    rows.push_back(payload);
    history.push_back(h);
    after = id;
  }
  std::vector<std::string_view> views(rows.begin(), rows.end());
  return to.insert_with_history(views, history);
}

// Takes the first free row of `t` with `c`, waiting up to `timeout`; false if none came.
inline bool take(q4m::Consumer& c, const std::shared_ptr<q4m::QueueTable>& t,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
  int idx = 0;
  return c.wait({{t, nullptr}}, timeout, &idx).ok() && idx == 1;
}

// Takes the next row with `a` and gives it back for `delay`; its id, or 0 if that failed.
inline q4m::RowId take_and_delay(q4m::Consumer& a, const std::shared_ptr<q4m::QueueTable>& t,
                                 std::chrono::milliseconds delay) {
  if (!take(a, t)) return 0;
  const q4m::RowId id = a.owned_rowid();
  return a.abort(delay).ok() ? id : 0;
}

// The wall clock in ms since 1970 (insert times, VISIBLE_AT times, retry delays' due times).
inline int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Polls `done` until it holds (true) or 10 s pass (false): for what a table's timer (the
// reaper's own thread) does.
inline bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The engine's binary log side (engine/binlog_statements.h), as a recorder: what a
// transaction tells its ReplicationLog.
struct RecordedRemovals : q4m::ReplicationLog {
  std::vector<q4m::NamedRow> rows;
  std::vector<size_t> deduplicated_positions;
  q4m::Status removed(const q4m::QueueTable&, const std::vector<q4m::NamedRow>& r) override {
    rows.insert(rows.end(), r.begin(), r.end());
    return q4m::Status::Ok();
  }
  q4m::Status deduplicated(const q4m::QueueTable&, const std::vector<size_t>& positions) override {
    deduplicated_positions.insert(deduplicated_positions.end(), positions.begin(), positions.end());
    return q4m::Status::Ok();
  }
  q4m::Status relayed(const q4m::QueueTable&, uint32_t, q4m::RowId) override { return q4m::Status::Ok(); }
  std::vector<q4m::NamedRow> redriven_rows;
  q4m::Status redriven(const q4m::QueueTable&, const std::vector<q4m::NamedRow>& r) override {
    redriven_rows.insert(redriven_rows.end(), r.begin(), r.end());
    return q4m::Status::Ok();
  }
};

struct SyncModeScope {  // tests run with sync none unless they say otherwise
  explicit SyncModeScope(q4m::SyncMode m) : old(q4m::settings().sync_mode.load()) {
    q4m::settings().sync_mode = static_cast<int>(m);
  }
  ~SyncModeScope() { q4m::settings().sync_mode = old; }
  int old;
};

}  // namespace q4m_test

#include <fstream>
#include <iterator>

namespace q4m_test {

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The binary log with sync_binlog=1 and queue_binlog_redo: it redoes every part, and keeps the
// redos it was given (`redos`).
class RedoingLog : public q4m::ReplicationLog {
 public:
  q4m::Status removed(const q4m::QueueTable&, const std::vector<q4m::NamedRow>&) override { return q4m::Status::Ok(); }
  q4m::Status deduplicated(const q4m::QueueTable&, const std::vector<size_t>&) override { return q4m::Status::Ok(); }
  q4m::Status relayed(const q4m::QueueTable&, uint32_t, q4m::RowId) override { return q4m::Status::Ok(); }
  q4m::Status redriven(const q4m::QueueTable&, const std::vector<q4m::NamedRow>&) override { return q4m::Status::Ok(); }
  bool redoes(const q4m::QueueTable&) override { return true; }
  q4m::Status prepared(const q4m::QueueTable&, const std::string& redo) override {
    redos.push_back(redo);
    return q4m::Status::Ok();
  }
  std::vector<std::string> redos;
};

// "Crash": the data file's bytes as they are now (no clean close, no index snapshot),
// opened as a new table `name` in `dir`. Null if that failed.
inline std::shared_ptr<q4m::QueueTable> crash_copy(const TempDir& dir, const std::string& path,
                                                   const std::string& name) {
  write_file_bytes(dir.file(name), read_file_bytes(path));
  std::shared_ptr<q4m::QueueTable> t;
  if (!q4m::TableRegistry::instance().acquire(dir.file(name), &t).ok()) return nullptr;
  return t;
}

}  // namespace q4m_test

#include <sys/stat.h>

namespace q4m_test {
inline bool file_exists_for_test(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
}  // namespace q4m_test
