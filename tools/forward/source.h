// The source side: owns one batch of rows at a time (queue_wait_batch(); with --batch 1 one
// row through queue_wait(), as with the original Q4M) on one connection.
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

  // Consumes the rows owned since the previous call (the caller must have made them
  // durable at the destination), then waits up to --wait-timeout for the next rows, at most
  // `max_rows` (<= --batch), and owns them. Returns how many; 0 on timeout (nothing owned).
  size_t take_next(size_t max_rows);
  // The rows taken, in increasing source row id order.
  std::vector<RowBuffer>& rows() { return rows_; }
  const std::vector<RowBuffer>& rows() const { return rows_; }
  const std::vector<uint64_t>& rowids() const { return rowids_; }
  size_t data_columns() const { return fetch_.size() - 1; }  // the last one is queue_rowid()

  // Removes the owned rows (queue_end()); only after they are durable at the destination.
  void finish_owned();

  // The id the source table gives its next new row (INFORMATION_SCHEMA.QUEUE_TABLES
  // NEXT_ROWID): every row it ever had has a smaller one. 0 if the server cannot tell (an
  // original Q4M source).
  uint64_t next_rowid();

 private:
  bool acquire_relay_lock();
  // SET SESSION `assignment`, skipped if the server does not know the variable.
  void set_if_supported(const std::string& assignment);
  std::string lock_name() const;
  void fetch_row(size_t i);

  const Options& opt_;
  Connection conn_{"source"};
  MYSQL_STMT* stmt_ = nullptr;
  RowBuffer fetch_;                // bound to the statement's result
  std::vector<RowBuffer> rows_;    // copies of the fetched rows; rows_.size() >= the count taken
  std::vector<uint64_t> rowids_;
  unsigned long previous_session_ = 0;  // our last connection's id, to end it if it lingers
};

}  // namespace q4m::forward
