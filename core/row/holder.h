// Holder: who holds rows of a table. A connection's Consumer holds the rows it owns (taken
// by queue_wait) and the rows its DELETE claimed; a table's expiry holds the rows past
// MESSAGE_TTL on their way out. A row points at its holder (RowEntry::holder); a holder
// gives back or removes every row it holds before it goes away.
#pragma once
#include <atomic>
#include <cstdint>

namespace q4m {

class Holder {
 public:
  explicit Holder(uint64_t connection_id = 0) : connection_id_(connection_id) {}
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;

  // CONNECTION_ID() of the connection, 0 for the table's own holders.
  uint64_t connection_id() const { return connection_id_; }
  // Whether its removals wait for a sync in a durable sync mode (queue_sync_removals).
  // Set and read by the holder's own thread only.
  bool sync_removals() const { return sync_removals_; }
  void set_sync_removals(bool sync) { sync_removals_ = sync; }
  // Another connection gave this holder's owned rows back to the queue (queue_release_owned):
  // that connection's id, 0 = none. Set by a table while no removal is being committed;
  // read, and cleared once it told its connection, by the holder's own thread.
  uint64_t revoked_by() const { return revoked_by_.load(std::memory_order_acquire); }
  void revoke(uint64_t by_connection) const { revoked_by_.store(by_connection, std::memory_order_release); }
  void clear_revoked() { revoked_by_.store(0, std::memory_order_relaxed); }
  // A table set one of this holder's owned rows aside as a dead row: the holder's own read
  // of it failed its checksum (core/table/damaged_rows.cc), so the statement returned none
  // of its rows, and its end() removes none of them. Set by the table on the holder's own
  // thread (the reader), read and cleared by that thread.
  bool row_set_aside() const { return row_set_aside_.load(std::memory_order_relaxed); }
  void note_row_set_aside() const { row_set_aside_.store(true, std::memory_order_relaxed); }
  void clear_row_set_aside() { row_set_aside_.store(false, std::memory_order_relaxed); }
  // A copying ALTER TABLE moved this holder's owned rows without keeping them its own (the
  // table left the engine): its end must not report them removed. Set by a table under its
  // locks; read, and cleared once it told its connection, by the holder's own thread.
  bool rows_moved() const { return rows_moved_.load(std::memory_order_acquire); }
  void mark_rows_moved() const { rows_moved_.store(true, std::memory_order_release); }
  void clear_rows_moved() { rows_moved_.store(false, std::memory_order_relaxed); }

 private:
  const uint64_t connection_id_;
  bool sync_removals_ = true;
  mutable std::atomic<uint64_t> revoked_by_{0};
  mutable std::atomic<bool> row_set_aside_{false};
  mutable std::atomic<bool> rows_moved_{false};
};

}  // namespace q4m
