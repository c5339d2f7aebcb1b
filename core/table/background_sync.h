// BackgroundSync: one thread per process that syncs the open tables' files every interval
// (queue_background_sync_ms, with queue_binlog_redo; docs/recovery.md, "Background syncs").
//
// With the prepares redone from the binary log nothing on the commit path syncs a table's
// file: only a binary log rotation (its checkpoint) or a clean close did. Every chunk written
// after the last sync carries the `unsynced` flag (a power cut may keep it and lose what
// precedes it), so after a crash a chunk the disk damaged anywhere in that stretch read as a
// lost tail and was cut with everything after it. A sync every interval bounds the stretch:
// the first chunk written after it is unflagged and says that every chunk before it is
// durable, so damage before it is refused as corruption. A table that went idle after the
// sync gets a synced mark (an empty unflagged chunk) at the next interval, which says the
// same without waiting for a write.
//
// The sync takes the table's writer turn (CommitPipeline::Turn): commits to that table queue
// behind it for one sync per interval; no commit waits for it otherwise.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <thread>

#include "core/util/guarded.h"

namespace q4m {

class BackgroundSync {
 public:
  static BackgroundSync& instance();
  ~BackgroundSync();

  // 0 stops the thread; another value (ms) starts it if needed. The first pass comes one
  // interval after the call.
  void set_interval_ms(uint64_t ms);
  uint64_t interval_ms();
  // Stops and joins the thread (plugin unload, before the tables close).
  void stop() { set_interval_ms(0); }

  // Asked before each pass: false skips it (the engine: the binary log is off). Set once.
  using Gate = bool (*)();
  void set_gate(Gate gate) { gate_ = gate; }

  // One pass over the open tables now (the thread's work; tests).
  static void sync_open_tables();

 private:
  BackgroundSync() = default;
  void run(uint64_t generation);

  struct State {
    uint64_t interval_ms = 0;
    std::thread thread;
    uint64_t generation = 0;  // of the running thread: one stopped (and replaced) exits
  };
  Guarded<State> state_;
  Gate gate_ = nullptr;
  std::condition_variable wake_;
};

}  // namespace q4m
