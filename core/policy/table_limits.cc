#include "core/policy/table_limits.h"

namespace q4m {

void TableLimits::configure(const TableOptions& options, RowContext& ctx) {
  const bool was_open = open();
  max_in_flight_ = options.max_in_flight;
  bucket_.set(options.max_rate, options.max_burst, ctx.now());  // a changed one keeps its tokens
  limited_ = max_in_flight_ != 0 || bucket_.limited();
  if (!was_open && open()) reopened_ = true;
  if (limited_ && !open() && bucket_.limited() && !bucket_.has(ctx.now())) {
    waiting_for_token_ = true;
    ctx.wake_at(bucket_.next(ctx.now()));
  }
}

void TableLimits::moved(RowEntry& e, RowState from, const Holder*, const Move& m, RowContext& ctx) {
  // What counted before this move, and after it.
  bool was_lent = false, was_claimed = false;
  if (from == RowState::kOwned) {
    owned_--;
    if (!lent_.empty()) was_lent = lent_.erase(e.id) != 0;
  } else if (from == RowState::kClaimed && !claimed_.empty()) {
    was_claimed = claimed_.erase(e.id) != 0;
  }
  const bool was_out = (from == RowState::kOwned && !was_lent) || was_claimed;
  bool out = false;
  if (m.to == RowState::kOwned) {
    owned_++;
    if (from == RowState::kDead || was_lent)
      lent_.insert(e.id);
    else
      out = true;
  } else if (m.to == RowState::kClaimed && was_out && !m.frees_slot) {  // its owner's transaction or DELETE
    claimed_.insert(e.id);
    out = true;
  }
  if (from == RowState::kFree && m.to == RowState::kOwned && !m.fresh && bucket_.limited()) {
    bucket_.spend(ctx.now());
    if (!bucket_.has(ctx.now()) && !waiting_for_token_) {
      waiting_for_token_ = true;
      ctx.wake_at(bucket_.next(ctx.now()));
    }
  }
  if (was_out && !out) left(ctx);
}

void TableLimits::removed(const RowEntry& before, RowContext& ctx) {
  bool was_out = false;
  if (before.state == RowState::kOwned) {
    owned_--;
    was_out = lent_.empty() || lent_.erase(before.id) == 0;
  } else if (before.state == RowState::kClaimed && !claimed_.empty()) {
    was_out = claimed_.erase(before.id) != 0;
  }
  if (was_out) left(ctx);
}

void TableLimits::left(RowContext&) {
  if (max_in_flight_ != 0 && in_flight() + 1 == max_in_flight_) reopened_ = true;
}

SteadyClock::time_point TableLimits::due(RowContext& ctx) {
  if (!waiting_for_token_) return SteadyClock::time_point::max();
  if (!bucket_.limited() || bucket_.has(ctx.now())) {
    waiting_for_token_ = false;
    reopened_ = true;
    return SteadyClock::time_point::max();
  }
  return bucket_.next(ctx.now());
}

void TableLimits::report(TableStats& s) const {
  s.in_flight = in_flight();
  // Closed: every free row is held back.
  const uint64_t not_free = s.owned_rows + s.delayed_rows + s.dead_rows;
  if (!open()) s.rows_held_back = s.rows > not_free ? s.rows - not_free : 0;
}

}  // namespace q4m
