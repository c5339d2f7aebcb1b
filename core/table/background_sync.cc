#include "core/table/background_sync.h"

#include <chrono>
#include <memory>
#include <vector>

#include "core/file/format.h"
#include "core/table/registry.h"
#include "core/table/table.h"
#include "core/util/blocking.h"
#include "core/util/settings.h"
#include "core/util/stats.h"

namespace q4m {

BackgroundSync& BackgroundSync::instance() {
  static BackgroundSync sync;
  return sync;
}

BackgroundSync::~BackgroundSync() { stop(); }

void BackgroundSync::set_interval_ms(uint64_t ms) {
  std::thread old;
  {
    auto st = state_.lock();
    st->interval_ms = ms;
    if (ms == 0) {
      st->generation++;  // the running thread exits
      old.swap(st->thread);
    } else if (!st->thread.joinable()) {
      const uint64_t generation = ++st->generation;
      st->thread = std::thread([this, generation] { run(generation); });
    }
    wake_.notify_all();  // a running thread plans again with the new interval
  }
  if (old.joinable()) old.join();
}

uint64_t BackgroundSync::interval_ms() { return state_.lock()->interval_ms; }

void BackgroundSync::run(uint64_t generation) {
  for (;;) {
    {
      auto st = state_.lock();
      uint64_t planned = st->interval_ms;
      auto at = std::chrono::steady_clock::now() + std::chrono::milliseconds(planned);
      for (;;) {
        if (st->generation != generation) return;
        if (st->interval_ms != planned) {  // changed: one new interval from now
          planned = st->interval_ms;
          at = std::chrono::steady_clock::now() + std::chrono::milliseconds(planned);
        }
        if (wake_.wait_until(st.unique_lock(), at) == std::cv_status::timeout && st->generation == generation &&
            st->interval_ms == planned)
          break;
      }
    }
    if (!gate_ || gate_()) sync_open_tables();
  }
}

void BackgroundSync::sync_open_tables() {
  // Weak: a table closed meanwhile (its file and lock) is not kept alive by the pass. A failed
  // sync leaves the table broken (sticky, as any failed sync): its next write reports the error.
  std::vector<std::weak_ptr<QueueTable>> tables;
  for (auto& table : TableRegistry::instance().open_tables()) tables.push_back(table);
  for (const auto& weak : tables)
    if (auto table = weak.lock()) (void)table->sync_in_background();
}

// Under the writer turn, so that no chunk is written meanwhile: after the sync, the next chunk
// is written unflagged (write_batch() flags a chunk only after unsynced appends).
Status Table::sync_in_background() {
  const SyncMode mode = settings().sync();
  if (mode == SyncMode::kNone) return Status::Ok();  // nothing is promised beyond a server crash
  CommitPipeline::Turn turn(pipeline_);
  auto w = writer_.lock();
  if (dropped_.load() || successor_raw_.load() || !w->broken.ok() || !w->file) return Status::Ok();
  if (w->file->has_unsynced_appends()) {
    BlockingScope syncing(BlockingWait::kSync);
    Status s = w->file->sync(mode);
    if (!s.ok()) {
      w->broken = s;  // after a failed sync the page cache may have lost our bytes
      return s;
    }
    global_stats().background_syncs.add();
    return s;
  }
  if (!w->tail_flagged) return Status::Ok();
  // Synced at the last pass and not written since: the synced mark says so in the file.
  const std::string mark = fmt::synced_mark_chunk();
  const uint64_t base = w->file->size();
  Status s = invalidate_snapshot(*w);
  if (s.ok()) s = w->file->append(mark, /*preallocate=*/true);
  if (s.ok()) {
    BlockingScope syncing(BlockingWait::kSync);
    s = w->file->sync(mode);
    if (!s.ok()) w->broken = s;
  }
  if (!s.ok()) return s;
  w->tail_flagged = false;
  state_.lock()->tail.append(w->file->id(), base, mark);  // readers' cache stays contiguous
  file_bytes_.store(w->file->size());
  global_stats().background_sync_marks.add();
  return s;
}

}  // namespace q4m
