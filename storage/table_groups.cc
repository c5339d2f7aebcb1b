// MESSAGE_GROUP_COLUMN inside the table: which grouped rows may go (message_groups.h) is
// kept in step with every state change of a grouped row (set_state), every removal
// (publish_removal) and every new row (publish); here is what ties the two together.
#include "queue_table_impl.h"

namespace q4m {

MessageGroups::RowLookup QueueTableImpl::group_lookup(TableState& st) {
  return [&st](RowId id) {
    MessageGroups::RowView v;
    if (const RowEntry* e = st.index.find(id)) {
      v.exists = true;
      v.in_line = st.in_line(*e);
      v.free = e->state == RowState::kFree;
      v.out = v.in_line && e->state == RowState::kOwned;
    }
    return v;
  };
}

void QueueTableImpl::release_ready(TableState& st) {
  if (!st.message_group) return;
  for (std::vector<RowId> ready = st.groups.take_newly_ready(); !ready.empty();
       ready = st.groups.take_newly_ready()) {
    for (RowId id : ready) {
      RowEntry* e = st.index.find(id);
      if (!e || !st.takeable(*e)) continue;  // taken already
      // Scans passed it while its group held it back.
      st.free_epoch++;
      st.cursors.row_returned(id);
      offer_row(st, *e, std::string_view());
    }
  }
}

void QueueTableImpl::set_message_group(std::shared_ptr<const KeyColumn> column) {
  auto st = state_.lock();
  if (st->message_group || !column || !st->file) return;
  st->message_group = std::move(column);
  // The rows in the table now (this runs when a statement first opens the table, before
  // anyone can take a row).
  const MessageGroups::RowLookup lookup = group_lookup(*st);
  std::string key;
  std::vector<RowId> damaged;
  st->for_each_payload(
      [](const RowEntry&) { return true; },
      [&](RowEntry& e, std::string_view payload) {
        if (!row_key(*st->message_group, payload, &key)) return;
        e.grouped = true;
        st->groups.add(e.id, key, lookup);
      },
      &damaged);
  for (RowId id : damaged) set_aside_damaged(*st, id, nullptr);  // in no group: its key is unknown
  release_ready(*st);
}

}  // namespace q4m
