#include "functions/stats_json.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "core/table/subscriptions.h"

namespace q4m_functions {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string stats_json(const std::string& table_label, q4m::QueueTable& table) {
  const q4m::TableStats stats = table.info();
  std::string out = "{\"table\": " + quoted(table_label);
  for (const q4m::Figure& figure : q4m::kTableFigures) {
    out += ", \"";
    out += figure.json;
    out += "\": " + std::to_string(stats.*figure.field);
  }
  // From INSERT to first hand-out: bucket bounds and cumulative counts, the last one every
  // row (+Inf), as a Prometheus histogram reads them.
  const q4m::WaitHistogram& h = table.counters().handout_wait;
  std::string bounds, cumulative;
  for (size_t i = 0; i < q4m::WaitHistogram::kBuckets; i++) {
    if (i < q4m::WaitHistogram::kBoundsMs.size())
      bounds += (i ? ", " : "") + std::to_string(q4m::WaitHistogram::kBoundsMs[i]);
    cumulative += (i ? ", " : "") + std::to_string(h.cumulative(i));
  }
  out += ", \"handout_wait\": {\"bounds_ms\": [" + bounds + "], \"cumulative\": [" + cumulative +
         "], \"sum_ms\": " + std::to_string(h.sum_ms()) + "}";
  if (q4m::Subscriptions* subs = table.subscriptions(); subs && subs->any()) {
    out += ", \"subscriptions\": [";
    bool first = true;
    for (const q4m::SubscriptionInfo& s : subs->list()) {
      out += first ? "{" : ", {";
      first = false;
      out += "\"name\": " + quoted(s.name) + ", \"condition\": " + quoted(s.condition) +
             ", \"start_rowid\": " + std::to_string(s.start) + ", \"pending_rows\": " + std::to_string(s.pending_rows) +
             ", \"oldest_age_ms\": " + std::to_string(s.oldest_age_ms) + ", \"owned_rows\": " +
             std::to_string(s.owned_rows) + ", \"delayed_rows\": " + std::to_string(s.delayed_rows) +
             ", \"dead_rows\": " + std::to_string(s.dead_rows) + ", \"rows_delivered\": " +
             std::to_string(s.rows_delivered) + ", \"rows_ended\": " + std::to_string(s.rows_ended) +
             ", \"waiters\": " + std::to_string(s.waiters) + "}";
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace q4m_functions
