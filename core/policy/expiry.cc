#include "core/policy/expiry.h"

#include <atomic>

namespace q4m {

namespace {
std::atomic<ExpiryLog*> g_log{nullptr};
}  // namespace

ExpiryLog* ExpiryLog::get() { return g_log.load(std::memory_order_acquire); }
void ExpiryLog::set(ExpiryLog* log) { g_log.store(log, std::memory_order_release); }

void Expiry::configure(const TableOptions& options, RowContext& ctx) {
  const uint64_t ms = options.message_ttl.count() > 0 ? static_cast<uint64_t>(options.message_ttl.count()) : 0;
  if (ms == ttl_ms_) return;
  ttl_ms_ = ms;
  if (ms == 0) return;  // rows claimed already are removed all the same
  ctx.wake_at(due(ctx));
}

void Expiry::added(RowEntry& e, std::string_view, RowContext& ctx) {
  if (ttl_ms_ == 0 || watched_) return;  // the oldest queued row is one of this commit's
  adding_ = true;
  const uint64_t expires_ms = e.time_ms + ttl_ms_;
  ctx.wake_at(ctx.now() + std::chrono::milliseconds(expires_ms > ctx.wall_ms() ? expires_ms - ctx.wall_ms() : 0));
}

Move Expiry::claim() const {
  Move m{RowState::kClaimed, &remover_};
  m.ends_as = EndKind::kExpired;
  // Never handed out again: out of its group's line now, not only once removed (with the
  // binary log, a logged transaction removes it later, and the rows of its key behind it
  // would wait for that, and could expire meanwhile).
  m.frees_slot = true;
  return m;
}

void Expiry::placing(RowEntry& e, Placement& p, RowContext& ctx) {
  if (p.to == RowState::kDelayed || !expired(e, ctx.wall_ms()) || paused()) return;
  p = claim();
  ctx.wake_at(ctx.now());  // the next pass removes it
}

SteadyClock::time_point Expiry::due(RowContext& ctx) {
  watched_ = false;
  if (ttl_ms_ == 0) return SteadyClock::time_point::max();
  if (paused()) return ctx.now() + kPausedPoll;
  size_t claimed = 0;
  for (size_t pos = 0, end = ctx.index.end_pos(); pos < end; pos++) {
    const RowEntry& e = ctx.index.at(pos);
    if (e.state == RowState::kRemoved) continue;
    if (!expired(e, ctx.wall_ms())) {  // this row and (nearly) all after it are younger
      watched_ = true;
      return ctx.now() + std::chrono::milliseconds(e.time_ms + ttl_ms_ - ctx.wall_ms());
    }
    // Held rows are left to their holder; they are claimed if they come back.
    if (!queued(e.state)) continue;
    ctx.move(e.id, claim());
    if (++claimed == kMaxPerPass) {
      watched_ = true;
      return ctx.now();
    }
  }
  return SteadyClock::time_point::max();
}

void Expiry::claims_removed(size_t n, TableCounters& counters) {
  counters.rows_expired.add(n);
  global_stats().rows_expired.add(n);
}

}  // namespace q4m
