#include "core/policy/message_groups.h"

#include <string>

#include "core/policy/dead_letters.h"

namespace q4m {

GroupOrder::RowLookup MessageGroups::lookup(RowContext& ctx) const {
  return [&index = ctx.index, max = max_deliveries_, &ending = ending_](RowId id) {
    GroupOrder::RowView v;
    if (const RowEntry* e = index.find(id)) {
      v.exists = true;
      v.in_line = in_line(*e, max) && (ending.empty() || !ending.count(id));
      v.free = e->state == RowState::kFree;
      v.out = v.in_line && e->state == RowState::kOwned;
    }
    return v;
  };
}

void MessageGroups::configure(const TableOptions& options, RowContext& ctx) {
  GroupOrder::Limits limits;
  limits.concurrency = options.group_concurrency;
  limits.rate = options.group_rate;
  limits.burst = options.group_burst;
  if (limits != order_.limits()) {
    order_.set_limits(limits, lookup(ctx), ctx.now());  // (before the rows are read: once)
    watch(ctx);
  }
  if (options.max_deliveries != max_deliveries_) {
    max_deliveries_ = options.max_deliveries;
    // An owned row may have crossed the new limit either way (in line or lent out).
    if (column_) order_.refresh_all(lookup(ctx), ctx.now());
  }
  if (column_ || !options.message_group) return;
  column_ = options.message_group;
  const GroupOrder::RowLookup rows = lookup(ctx);
  std::string key;
  ctx.for_each_payload([](const RowEntry&) { return true; }, [&](RowEntry& e, std::string_view payload) {
    if (!row_key(*column_, payload, &key)) return;
    e.grouped = true;
    order_.add(e.id, key, rows, ctx.now());
  });
  watch(ctx);
}

void MessageGroups::added(RowEntry& e, std::string_view payload, RowContext& ctx) {
  if (!column_) return;
  std::string key;
  if (!row_key(*column_, payload, &key)) return;
  e.grouped = true;
  order_.add(e.id, key, lookup(ctx), ctx.now());
  watch(ctx);
}

}  // namespace q4m
