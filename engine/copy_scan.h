// CopyScan: every live row of a queue in id order, rows owned by consumers included.
// ALTER TABLE copies a queue through a table scan; a normal scan hides rows owned by
// other connections, which would silently drop them from the new table.
#pragma once
#include <cstdint>
#include <string>

#include "core/table/queue_table.h"

namespace q4m_engine {

class CopyScan {
 public:
  void start(q4m::QueueTable* table);
  // *history: what the row has been through, for the copy to keep (null: not wanted).
  q4m::Status next(q4m::QueueTable* table, q4m::RowId* id, std::string* payload, bool* found,
                   q4m::RowHistory* history);

 private:
  q4m::RowId after_ = 0;
};

}  // namespace q4m_engine
