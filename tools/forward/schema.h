// Which columns the relay copies, read from both servers' information_schema.
#pragma once

#include <string>
#include <vector>

#include "connection.h"
#include "options.h"

namespace q4m::forward {

struct TableColumn {
  std::string name;
  bool generated = false;  // GENERATED ALWAYS AS (...): computed, never inserted
};

// The table's columns in definition order. Throws DbError(kConfig) if the table does not
// exist or is not a QUEUE table (relay dedup needs the QUEUE engine on both sides).
std::vector<TableColumn> read_queue_table_columns(Connection& conn, const Endpoint& ep);

// Columns to copy: every source column the destination stores (its non-generated columns),
// in source order. A source column the destination lacks is a configuration error (its
// data would be lost); destination-only columns take their defaults.
std::vector<std::string> columns_to_relay(const std::vector<TableColumn>& src,
                                          const std::vector<TableColumn>& dst, const Endpoint& dst_ep);

}  // namespace q4m::forward
