#include "copy_scan.h"

namespace q4m_engine {

void CopyScan::start(q4m::QueueTable* table) {
  after_ = 0;
  owned_left_ = table->info().owned_rows;
}

// Unowned rows come from next_visible(); owned rows can only sit in the id gap before
// the next unowned one, where read_row() (which ignores ownership) finds them.
q4m::Status CopyScan::next(q4m::QueueTable* table, q4m::RowId* id, std::string* payload,
                           bool* found) {
  for (;;) {
    q4m::RowId visible = 0;
    bool has_visible = false;
    q4m::Status st = table->next_visible(nullptr, after_, &visible, nullptr, &has_visible);
    if (!st.ok()) return st;
    if (owned_left_ > 0) {
      q4m::RowId limit = has_visible ? visible : table->info().next_rowid;
      for (q4m::RowId probe = after_ + 1; probe < limit; probe++) {
        st = table->read_row(probe, payload, found);
        if (!st.ok()) return st;
        if (*found) {
          owned_left_--;
          *id = after_ = probe;
          return q4m::Status::Ok();
        }
      }
    }
    if (!has_visible) {
      *found = false;
      return q4m::Status::Ok();
    }
    after_ = visible;
    st = table->read_row(visible, payload, found);
    if (!st.ok() || *found) {
      *id = visible;
      return st;
    }
    // removed between the two calls: look further
  }
}

}  // namespace q4m_engine
