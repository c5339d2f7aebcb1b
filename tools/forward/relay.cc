#include "relay.h"

#include <mysqld_error.h>

#include <algorithm>

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

// One INSERT per part: a part holds at most max_rows_per_insert() rows and, past its first
// row, at most 4 MiB of values and never more than the destination's max_allowed_packet, so
// a batch of big rows stays under it. Each part is all-or-nothing at the destination; a retry
// after a failure resumes at the first part not known to be durable.
void Relay::deliver_pending() {
  constexpr size_t kMaxInsertBytes = 4u << 20;
  refuse_rows_over_max_packet();
  const size_t columns = src_.data_columns();
  const size_t part_limit = std::min(kMaxInsertBytes, dst_.max_packet());
  while (delivered_ < pending_) {
    size_t count = 0, bytes = Destination::kPacketOverhead;
    size_t max_count = dst_.max_rows_per_insert();
    if (full_part_rows_) max_count = std::min(max_count, full_part_rows_);
    while (delivered_ + count < pending_ && count < max_count) {
      const size_t row = Destination::packet_bytes(src_.rows()[delivered_ + count], columns);
      if (count > 0 && bytes + row > part_limit) break;
      bytes += row;
      count++;
    }
    deliver_part(delivered_, count);
    delivered_ += count;
  }
  pending_ = delivered_ = 0;
  pending_retried_ = false;
  full_part_rows_ = 0;
}

// A row the destination can never accept would fail (and be retried) forever. Checked before
// any of the rows still to deliver is sent (on a retry too: the limit is read again at each
// reconnect), so a new batch stays in the source, undelivered.
void Relay::refuse_rows_over_max_packet() const {
  const size_t columns = src_.data_columns();
  for (size_t i = delivered_; i < pending_; ++i) {
    const size_t bytes = Destination::kPacketOverhead + Destination::packet_bytes(src_.rows()[i], columns);
    if (bytes <= dst_.max_packet()) continue;
    throw DbError(ErrorKind::kConfig, 0,
                  "source row " + std::to_string(src_.rowids()[i]) + " needs an INSERT of up to " +
                      std::to_string(bytes) + " bytes, more than the destination's max_allowed_packet (" +
                      std::to_string(dst_.max_packet()) + " bytes): it cannot be relayed. Raise max_allowed_packet "
                      "on the destination to at least " + std::to_string(bytes) +
                      " and start the relay again; the row stays in the source");
  }
}

void Relay::deliver_part(size_t first, size_t count) {
  const uint64_t* ids = src_.rowids().data() + first;
  size_t dropped;
  try {
    dropped = dst_.insert(src_.rows().data() + first, count, src_.data_columns(), ids);
  } catch (const DbError& e) {
    pending_retried_ = true;
    // A destination at its MAX_ROWS takes a part whole or not at all: a part bigger than the
    // room consumers make would never fit. Retry (after the back-off) in halves, down to
    // single rows; dedup keeps the parts in order either way.
    if (e.code == ER_RECORD_FILE_FULL && count > 1) full_part_rows_ = std::max<size_t>(1, count / 2);
    throw;
  }
  counters_.last_rowid = ids[count - 1];
  counters_.relayed += count - dropped;
  counters_.replays_dropped += dropped;
  if (dropped > 0) {
    const uint64_t newest_dropped = ids[dropped - 1];
    // Replays are expected only for rows this process (or its predecessor, before our first
    // accepted row) may already have delivered. A newer row being dropped means the
    // destination's record for our source id is ahead of this source: a re-created source
    // table or a second producer using the same --source-id. Relaying on would lose rows.
    if (any_accepted_ && newest_dropped > max_accepted_ && !pending_retried_)
      throw DbError(ErrorKind::kConflict, 0,
                    "destination dropped source row " + std::to_string(newest_dropped) + " as already received, but "
                    "the newest row relayed so far is " + std::to_string(max_accepted_) + ": is --source-id " +
                    std::to_string(opt_.source_id) + " used for another source, or was the source table re-created? "
                    "Stopping; the rows stay in the source");
    // What this process saw is forgotten at a restart; the source's own ids are not: that
    // check (verify_replays) runs before the source may consume the dropped rows.
    replay_record_to_verify_ = std::max(replay_record_to_verify_, dst_.replay_record());
    newest_replay_to_verify_ = std::max(newest_replay_to_verify_, newest_dropped);
    if (dropped == 1)
      log_line("destination: source row %llu was already received (replay after a restart), dropped",
               static_cast<unsigned long long>(ids[0]));
    else
      log_line("destination: source rows %llu to %llu (%zu rows) were already received (replay after a restart), dropped",
               static_cast<unsigned long long>(ids[0]), static_cast<unsigned long long>(newest_dropped), dropped);
  }
  if (dropped < count) {
    any_accepted_ = true;
    max_accepted_ = std::max(max_accepted_, ids[count - 1]);
  }
}

// A row dropped as a replay was delivered before, so its source row id is below the source's
// next id, and so is the destination's record for our source id. A record at or past the
// source's next id was not written by any relay of this source (another producer with our
// id, a re-created source table): the rows it drops would be lost once consumed here. Runs
// before the next wait (or the final queue_end()) consumes them, at every start, so a
// restart cannot turn the misconfiguration into a loss.
void Relay::verify_replays() {
  const uint64_t record = replay_record_to_verify_, newest = newest_replay_to_verify_;
  if (!src_.is_open()) {  // the rows went back to the source: nothing is consumed
    replay_record_to_verify_ = newest_replay_to_verify_ = 0;
    return;
  }
  const uint64_t next = src_.next_rowid();
  if (next == 0) {
    if (!told_unverifiable_)
      log_line("source: cannot read its next row id (INFORMATION_SCHEMA.QUEUE_TABLES): dropped replays are "
               "checked only against the rows this process relayed");
    told_unverifiable_ = true;
  } else if (record >= next || newest >= next) {
    throw DbError(ErrorKind::kConflict, 0,
                  "destination dropped source rows up to " + std::to_string(newest) +
                      " as already received: its record for source id " + std::to_string(opt_.source_id) +
                      " is at row " + std::to_string(record) + ", but the source table's rows never went past " +
                      std::to_string(next - 1) + ": is --source-id " + std::to_string(opt_.source_id) +
                      " used for another source, or was the source table re-created? Stopping; the rows stay in "
                      "the source. Use a new --source-id for this source");
  }
  replay_record_to_verify_ = newest_replay_to_verify_ = 0;
}

// At most --batch rows, and no more than --max-rows still allows.
size_t Relay::rows_to_take() const {
  size_t n = opt_.batch;
  if (opt_.max_rows) n = std::min<uint64_t>(n, opt_.max_rows - (counters_.relayed + counters_.replays_dropped));
  return std::max<size_t>(n, 1);
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
  if (newest_replay_to_verify_) on_source([&] { verify_replays(); });
  if (should_stop()) {
    finish_owned_row();
    return false;
  }
  if (!src_.is_open() && !on_source([&] { return open_source(); })) return false;  // shutdown during lock wait
  // Consumes the owned rows, which are durable at the destination by now.
  const size_t got = on_source([&] { return src_.take_next(rows_to_take()); });
  owns_row_ = got > 0;
  pending_ = got;
  delivered_ = 0;
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
        log_line("%s error, exiting", e.kind == ErrorKind::kConfig     ? "configuration"
                                      : e.kind == ErrorKind::kConflict ? "source id conflict"
                                                                       : "fatal");
        code = e.kind == ErrorKind::kConfig     ? kExitConfig
               : e.kind == ErrorKind::kConflict ? kExitConflict
                                                : kExitFatal;
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
