#include "relay.h"

#include "db_error.h"
#include "log.h"
#include "schema.h"
#include "shutdown.h"

namespace q4m::forward {

Relay::Relay(const Options& opt)
    : opt_(opt), src_(opt), dst_(opt), backoff_(opt.max_backoff), reporter_(opt.stats_interval) {}

void Relay::discover_columns() {
  Connection src("source"), dst("destination");
  src.open(opt_.src, opt_.io_timeout, opt_.io_timeout);
  auto src_cols = read_queue_table_columns(src, opt_.src);
  dst.open(opt_.dst, opt_.io_timeout, opt_.io_timeout);
  auto dst_cols = read_queue_table_columns(dst, opt_.dst);
  columns_ = columns_to_relay(src_cols, dst_cols, opt_.dst);
  std::string list;
  for (const std::string& c : columns_) list += (list.empty() ? "" : ", ") + c;
  log_line("relaying %s -> %s as source id %u; columns: %s", opt_.src.describe().c_str(),
           opt_.dst.describe().c_str(), opt_.source_id, list.c_str());
}

bool Relay::open_source() {
  owns_row_ = false;  // a new session owns nothing; the old one's row went back to the queue
  if (!src_.open(columns_)) return false;
  if (src_was_open_) {
    ++counters_.src_reconnects;
    log_line("source: reconnected");
  }
  src_was_open_ = true;
  return true;
}

void Relay::open_destination() {
  dst_.open(columns_);
  if (dst_was_open_) {
    ++counters_.dst_reconnects;
    log_line("destination: reconnected");
  }
  dst_was_open_ = true;
}

void Relay::deliver_pending() {
  uint64_t rowid = src_.rowid();
  bool accepted;
  try {
    accepted = dst_.insert(src_.row(), src_.data_columns(), rowid);
  } catch (const DbError&) {
    pending_retried_ = true;
    throw;
  }
  counters_.last_rowid = rowid;
  if (accepted) {
    ++counters_.relayed;
    any_accepted_ = true;
    if (rowid > max_accepted_) max_accepted_ = rowid;
  } else {
    ++counters_.replays_dropped;
    // Replays are expected only for rows this process (or its predecessor, before our first
    // accepted row) may already have delivered. A newer row being dropped means the
    // destination's record for our source id is ahead of this source: a re-created source
    // table or a second relay using the same --source-id. Relaying on would lose rows.
    if (any_accepted_ && rowid > max_accepted_ && !pending_retried_)
      throw DbError(ErrorKind::kFatal, 0,
                    "destination dropped source row " + std::to_string(rowid) + " as already received, but the newest "
                    "row relayed so far is " + std::to_string(max_accepted_) + ": is --source-id " +
                    std::to_string(opt_.source_id) + " used for another source, or was the source table re-created? "
                    "Stopping; the row stays in the source");
    log_line("destination: source row %llu was already received (replay after a restart), dropped",
             static_cast<unsigned long long>(rowid));
  }
  pending_ = false;
  pending_retried_ = false;
}

bool Relay::should_stop() {
  if (shutdown_requested()) {
    log_line("shutdown requested");
    return true;
  }
  if (opt_.max_rows && counters_.relayed + counters_.replays_dropped >= opt_.max_rows) {
    log_line("--max-rows %llu reached", static_cast<unsigned long long>(opt_.max_rows));
    return true;
  }
  return false;
}

void Relay::finish_owned_row() {
  if (!owns_row_ || !src_.is_open()) return;
  try {
    src_.finish_owned();
  } catch (const DbError& e) {
    // The row is durable at the destination; if it returns to the source, the next run's
    // replay is dropped by dedup.
    log_line("%s (the delivered row returns to the source and is dropped as a replay next time)", e.what());
  }
  owns_row_ = false;
}

bool Relay::step() {
  // The destination first: without it, owning a source row only blocks it.
  if (!dst_.is_open()) on_destination([&] { open_destination(); });
  if (pending_) on_destination([&] { deliver_pending(); });
  if (should_stop()) {
    finish_owned_row();
    return false;
  }
  if (!src_.is_open() && !on_source([&] { return open_source(); })) return false;  // shutdown during lock wait
  // Consumes the owned row, which is durable at the destination by now.
  bool got = on_source([&] { return src_.take_next(); });
  owns_row_ = got;
  pending_ = got;
  auto now = std::chrono::steady_clock::now();
  if (got) {
    last_row_time_ = now;
  } else if (opt_.idle_exit > 0 && std::chrono::duration<double>(now - last_row_time_).count() >= opt_.idle_exit) {
    log_line("no row for %.1f s (--idle-exit)", opt_.idle_exit);
    return false;
  }
  return true;
}

ExitCode Relay::run() {
  last_row_time_ = std::chrono::steady_clock::now();
  ExitCode code = kExitDone;
  for (;;) {
    try {
      if (columns_.empty()) discover_columns();
      if (!step()) break;
      backoff_.reset();
      reporter_.maybe_report(counters_);
    } catch (const DbError& e) {
      if (e.kind != ErrorKind::kTransient) {
        log_line("%s", e.what());
        log_line("%s error, exiting", e.kind == ErrorKind::kConfig ? "configuration" : "fatal");
        code = e.kind == ErrorKind::kConfig ? kExitConfig : kExitFatal;
        break;
      }
      // The side that failed is closed (on_source/on_destination); start again. A closed
      // source session returns its row to the queue; a pending row is delivered again
      // first (dedup drops it if it had arrived).
      double delay = backoff_.next();
      log_line("%s; retrying in %.1f s", e.what(), delay);
      if (!sleep_unless_shutdown(delay)) {
        log_line("shutdown requested while disconnected");
        break;
      }
    }
  }
  src_.close();
  dst_.close();
  reporter_.report(counters_, "final");
  return code;
}

}  // namespace q4m::forward
