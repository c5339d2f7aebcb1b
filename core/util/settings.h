// Process-wide storage settings. The engine maps server variables onto these;
// the storage layer reads them on each operation (relaxed atomics: a change
// applies to the next commit/compaction).
#pragma once
#include <atomic>
#include <cstdint>

namespace q4m {

enum class SyncMode : int {
  kNone = 0,       // write(2) only: safe on server crash, may lose recent rows on machine crash
  kFdatasync = 1,  // default: fdatasync per group commit
  kFsync = 2,      // fsync per group commit
};

struct StorageSettings {
  std::atomic<int> sync_mode{static_cast<int>(SyncMode::kFdatasync)};
  // Compaction starts automatically when the file is at least this big and
  // removed bytes are at least compaction_removed_percent of it.
  std::atomic<uint64_t> compaction_min_file_bytes{16u << 20};
  std::atomic<int> compaction_removed_percent{50};
  std::atomic<bool> use_concurrent_compaction{true};
  std::atomic<uint64_t> concurrent_compaction_interval{1u << 20};  // bytes copied between serving writers
  std::atomic<uint64_t> mmap_max{1ull << 30};
  // How long a caller queued behind a group commit spins (yielding) before it sleeps.
  std::atomic<uint32_t> commit_spin_us{300};
  // Rows removed from one table that it keeps for open consistent snapshots (their reads);
  // past it the oldest snapshots cannot read the table any more (core/table/snapshots.h).
  std::atomic<uint64_t> snapshot_journal_rows{4'000'000};

  SyncMode sync() const { return static_cast<SyncMode>(sync_mode.load(std::memory_order_relaxed)); }
};

StorageSettings& settings();

}  // namespace q4m
