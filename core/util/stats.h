// Lock-free counters: global (SHOW ENGINE QUEUE STATUS) and per table (queue_stats()).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace q4m {

struct Counter {
  std::atomic<uint64_t> value{0};
  void add(uint64_t n = 1) { value.fetch_add(n, std::memory_order_relaxed); }
  void set(uint64_t n) { value.store(n, std::memory_order_relaxed); }  // a gauge
  uint64_t get() const { return value.load(std::memory_order_relaxed); }
};

struct GlobalStats {
  Counter sys_write, sys_read, sys_sync;       // I/O system calls
  Counter sync_us;  // wall-clock microseconds spent inside those syncs: sync_us / sys_sync = the disk's latency
  Counter group_commits;                       // chunks written by the log writer
  Counter unsynced_removal_commits;  // of which, in a durable mode, removals only, none asking for a sync
  Counter removals_answered_before_sync;  // removals that waived the sync, in a batch synced for others
  // commit records that waived the sync (the binary log recovers them), in a batch synced for
  // others' prepares: published and answered once written
  Counter commit_records_before_sync;
  // syncs of a table's file by the background sync (queue_background_sync_ms), and the synced
  // marks it appended after a table went idle (core/table/background_sync.h)
  Counter background_syncs, background_sync_marks;
  Counter commit_spin_hits, commit_spin_timeouts;  // followers done while spinning / gone to sleep after
  Counter rows_written, rows_removed;
  Counter waits, wait_immediate, wait_handoff, wait_timeouts, wait_interrupts;
  Counter wait_yields;  // sleeping waits ended early by their WaitYield (DDL needed the tables)
  // rows handed to a waiter that took an earlier listed subscription's row instead (given back)
  Counter wait_handoffs_passed_over;
  Counter ends, aborts, disconnect_returns, lease_expiries;
  Counter rows_expired;  // removed because their table's MESSAGE_TTL ran out
  Counter rows_dead_lettered;  // became dead letters (MAX_DELIVERIES)
  Counter rows_released, rows_redriven, rows_purged;  // queue_release_owned(), queue_redrive_dead(), queue_purge_dead()
  Counter returns_recorded;  // rows given back whose delivery count and delay went into a RETURN record
  Counter cond_evals, cond_compiles, cond_cache_hits;
  Counter compactions, recoveries;
  Counter damaged_reads;  // reads of a row whose bytes on disk failed their checksum
  // A gauge: RAM the open tables' row indexes hold (each table adds what changed; core/table/writer.cc).
  Counter memory_bytes;
  // (name, value) pairs in a stable order, for SHOW ENGINE QUEUE STATUS.
  std::vector<std::pair<std::string, uint64_t>> snapshot() const;
};

GlobalStats& global_stats();

}  // namespace q4m
