#include "core/policy/delays.h"

namespace q4m {

void Delays::configure(const TableOptions& options, RowContext& ctx) {
  if (visible_at_ || !options.visible_at) return;
  visible_at_ = options.visible_at;
  const int64_t now = static_cast<int64_t>(ctx.wall_ms());
  ctx.for_each_payload([](const RowEntry& e) { return e.state == RowState::kFree; },
                       [&](RowEntry& e, std::string_view payload) {
                         const int64_t at = visible_at_ms(*visible_at_, payload);
                         if (at > now) {
                           Move m{RowState::kDelayed};
                           m.delay = std::chrono::milliseconds(at - now);
                           m.delay_kind = DelayKind::kVisibleAt;
                           ctx.move(e.id, m);
                         }
                       });
}

void Delays::opened(RecoveredTable& recovered, RowContext& ctx) {
  for (const auto& [id, due] : recovered.due_ms) {
    if (due <= ctx.wall_ms()) continue;
    RowEntry* e = ctx.index.find(id);
    if (!e || e->state != RowState::kFree) continue;
    Move m{RowState::kDelayed};
    m.delay = std::chrono::milliseconds(due - ctx.wall_ms());
    ctx.move(id, m);
  }
}

void Delays::placing_new(RowEntry&, std::string_view payload, const RowHistory* history, Placement& p,
                         RowContext& ctx) {
  if (history && history->due_ms > ctx.wall_ms()) {
    p.to = RowState::kDelayed;
    p.delay = std::chrono::milliseconds(history->due_ms - ctx.wall_ms());
    p.delay_kind = DelayKind::kRetry;
    return;
  }
  if (!visible_at_) return;
  const int64_t at = visible_at_ms(*visible_at_, payload);
  if (at > static_cast<int64_t>(ctx.wall_ms())) {
    p.to = RowState::kDelayed;
    p.delay = std::chrono::milliseconds(at - static_cast<int64_t>(ctx.wall_ms()));
    p.delay_kind = DelayKind::kVisibleAt;
  }
}

void Delays::placing(RowEntry& e, Placement& p, RowContext&) {
  if (p.delay.count() > 0) {
    p.to = RowState::kDelayed;
    p.delay_kind = DelayKind::kRetry;
  } else if (!tokens_.empty() && tokens_.count(e.id)) {  // a DELETE's claim let go: its deadline is still ahead
    p.to = RowState::kDelayed;
    p.resume = true;
  }
}

void Delays::moved(RowEntry& e, RowState from, const Holder*, const Move& m, RowContext& ctx) {
  if (m.to == RowState::kDelayed) {
    if (m.resume) return;
    // Deadlines of delayed rows that were deleted meanwhile stay until due: prune them once
    // they outnumber the delayed rows by far.
    if (deadlines_.size() >= 2 * tokens_.size() + 1024) deadlines_.drop_stale([&](const Deadline& d) { return live(d); });
    const uint64_t token = next_token();
    const SteadyClock::time_point at = ctx.now() + m.delay;
    tokens_[e.id] = Token{token, ctx.wall_ms() + static_cast<uint64_t>(m.delay.count()), m.delay_kind == DelayKind::kRetry};
    deadlines_.push(Deadline{at, e.id, token});
    ctx.wake_at(at);
    return;
  }
  // A claim keeps the delay (the claim may be let go); anything else ends it.
  if (from == RowState::kDelayed && m.to != RowState::kClaimed && !tokens_.empty()) tokens_.erase(e.id);
}

void Delays::removed(const RowEntry& before, RowContext&) {
  if (!tokens_.empty()) tokens_.erase(before.id);  // its deadline is stale now
}

SteadyClock::time_point Delays::due(RowContext& ctx) {
  while (deadlines_.due(ctx.now())) {
    const Deadline d = deadlines_.pop();
    if (!live(d)) continue;  // the row was removed, or delayed again since
    tokens_.erase(d.id);
    const RowEntry* e = ctx.index.find(d.id);
    if (e && e->state == RowState::kDelayed) ctx.requeue(d.id);  // else deleted, or claimed by a DELETE
  }
  return deadlines_.earliest();
}

void Delays::keeping(const RowEntry& e, fmt::ReturnedRow& kept) const {
  if (e.state != RowState::kDelayed && e.state != RowState::kClaimed) return;
  auto it = tokens_.find(e.id);
  if (it != tokens_.end() && it->second.retry) kept.due_ms = it->second.due_ms;
}

void Delays::forget() {
  deadlines_.clear();
  tokens_.clear();
}

}  // namespace q4m
