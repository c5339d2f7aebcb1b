// The destination side: durable, deduplicated INSERTs (queue_set_srcid + INSERT).
#pragma once

#include <cstdint>
#include <string>
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
  bool is_open() const { return conn_.is_open() && stmt_ != nullptr; }

  // Inserts the first `columns` values of `row` as row `rowid` of our source id. Returns
  // only once the row is durable. Returns false if the engine said it dropped the row as
  // already received (0 affected rows, or a note naming queue_set_srcid); an engine that
  // drops silently makes every row look accepted.
  bool insert(RowBuffer& row, size_t columns, uint64_t rowid);

 private:
  bool dropped_per_warnings(uint64_t rowid);
  static constexpr int kMaxLoggedWarnings = 20;
  int warnings_logged_ = 0;

  const Options& opt_;
  Connection conn_{"destination"};
  MYSQL_STMT* stmt_ = nullptr;
  size_t param_count_ = 0;
};

}  // namespace q4m::forward
