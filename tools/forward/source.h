// The source side: owns one row at a time through queue_wait() on one connection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "connection.h"
#include "options.h"
#include "row_buffer.h"

namespace q4m::forward {

class Source {
 public:
  explicit Source(const Options& opt) : opt_(opt) {}
  ~Source() { close(); }

  // Connects, takes the relay lock of the source table (one relay per source table, else
  // a returned row could be relayed twice) and prepares the wait statement.
  // Returns false if a shutdown was requested while waiting for the lock.
  bool open(const std::vector<std::string>& columns);
  void close();
  bool is_open() const { return conn_.is_open() && stmt_ != nullptr; }

  // Consumes the row owned since the previous call (the caller must have made it durable
  // at the destination), then waits up to --wait-timeout for the next row and owns it.
  // Returns false on timeout (nothing owned then).
  bool take_next();
  RowBuffer& row() { return row_; }
  size_t data_columns() const { return row_.size() - 1; }  // the last one is queue_rowid()
  uint64_t rowid() const { return rowid_; }

  // Removes the owned row (queue_end()); only after it is durable at the destination.
  void finish_owned();

 private:
  bool acquire_relay_lock();
  std::string lock_name() const;

  const Options& opt_;
  Connection conn_{"source"};
  MYSQL_STMT* stmt_ = nullptr;
  RowBuffer row_;
  uint64_t rowid_ = 0;
  unsigned long previous_session_ = 0;  // our last connection's id, to end it if it lingers
};

}  // namespace q4m::forward
