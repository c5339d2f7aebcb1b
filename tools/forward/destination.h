// The destination side: durable, deduplicated INSERTs (queue_set_srcid + INSERT).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "connection.h"
#include "options.h"
#include "row_buffer.h"

namespace q4m::forward {

class Destination {
 public:
  explicit Destination(const Options& opt) : opt_(opt) {}
  ~Destination() { close(); }

  void open(const std::vector<std::string>& columns);
  void close();
  bool is_open() const { return conn_.is_open(); }

  // Rows one INSERT may carry: --batch, and at most 65,535 placeholders per statement.
  size_t max_rows_per_insert() const;

  // The destination's max_allowed_packet (read at open): neither the INSERT's packet nor the
  // queue_set_srcid() statement may be longer.
  size_t max_packet() const { return max_packet_; }
  // Upper bounds on those packets' lengths: a fixed part, plus packet_bytes() per row.
  static constexpr size_t kPacketOverhead = 64;
  static size_t packet_bytes(const RowBuffer& row, size_t columns);

  // Inserts the first `columns` values of rows[0..count) as source rows ids[0..count) of our
  // source id, with one queue_set_srcid() and one INSERT: all of them durable when it
  // returns, or none. Returns how many leading rows the engine dropped as already received
  // (its note naming queue_set_srcid, or 0 affected rows); an engine that drops silently
  // makes every row look accepted.
  size_t insert(RowBuffer* rows, size_t count, size_t columns, const uint64_t* ids);
  // After an insert() that dropped rows: the destination's last received row of our source
  // id, as its note told (0 if it did not: Q4M, or an engine before the note said it).
  uint64_t replay_record() const { return replay_record_; }

 private:
  MYSQL_STMT* statement_for(size_t rows);  // prepared INSERT of that many rows
  size_t read_max_packet();
  void close_statements();
  size_t dropped_per_warnings(size_t count, const uint64_t* ids);
  static constexpr int kMaxLoggedWarnings = 20;
  int warnings_logged_ = 0;
  uint64_t replay_record_ = 0;

  const Options& opt_;
  Connection conn_{"destination"};
  std::string insert_head_;  // INSERT INTO `db`.`t` (`a`, `b`) VALUES
  std::string row_marks_;    // (?, ?)
  size_t param_count_ = 0;
  size_t max_packet_ = 0;
  // At most two prepared INSERTs: a full batch, and the size used last (a short batch).
  std::vector<std::pair<size_t, MYSQL_STMT*>> statements_;
};

}  // namespace q4m::forward
