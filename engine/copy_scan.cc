#include "engine/copy_scan.h"

namespace q4m_engine {

void CopyScan::start(q4m::QueueTable*) { after_ = 0; }

// next_row() skips removed rows in the index itself, so sparse ids cost nothing extra
// (probing every id in a gap with read_row() did).
q4m::Status CopyScan::next(q4m::QueueTable* table, q4m::RowId* id, std::string* payload, bool* found,
                           q4m::RowHistory* history) {
  q4m::Status st = table->next_row(after_, id, payload, found, history);
  if (st.ok() && *found) after_ = *id;
  return st;
}

}  // namespace q4m_engine
