// What a QUEUE table's definition (its TABLE_SHARE) says, worked out once per definition and
// kept with it (TABLE_SHARE::ha_share): where its data file is, which version of the
// definition it is, and what its options ask of the queue. Every statement that opens the
// table, and every queue function that names it, reads this one value.
#pragma once
#include <memory>
#include <string>

#include "core/policy/options.h"

struct TABLE_SHARE;

namespace q4m_engine {

struct TableDefinition {
  std::string path;     // the data file
  std::string version;  // tabledef_version: what a condition was compiled for
  std::shared_ptr<const q4m::TableOptions> options;
  int row_id_column = -1;  // ROW_ID_COLUMN's position (-1: none)
};

// The definition of a QUEUE table's share, made on first use.
std::shared_ptr<const TableDefinition> definition_of(TABLE_SHARE* share);

}  // namespace q4m_engine
