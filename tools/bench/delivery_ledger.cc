#include "delivery_ledger.h"

namespace q4m::bench {

DeliveryLedger::DeliveryLedger(uint64_t expected)
    : expected_(expected), seen_(new std::atomic<uint8_t>[expected]) {
  for (uint64_t i = 0; i < expected; ++i) seen_[i].store(0, std::memory_order_relaxed);
}

void DeliveryLedger::record(uint64_t id, bool payload_ok) {
  received_.fetch_add(1, std::memory_order_relaxed);
  if (!payload_ok) bad_payload_.fetch_add(1, std::memory_order_relaxed);
  if (id >= expected_) {
    out_of_range_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (seen_[id].exchange(1, std::memory_order_relaxed) != 0)
    duplicates_.fetch_add(1, std::memory_order_relaxed);
}

Verification DeliveryLedger::verify(uint64_t rows_left) const {
  Verification v;
  v.expected = expected_;
  v.received = received_.load();
  v.duplicates = duplicates_.load();
  v.out_of_range = out_of_range_.load();
  v.bad_payload = bad_payload_.load();
  v.rows_left = rows_left;
  bool any = false;
  for (uint64_t i = 0; i < expected_; ++i) {
    if (!seen_[i].load(std::memory_order_relaxed)) continue;
    ++v.distinct;
    if (!any) v.min_id = i;
    v.max_id = i;
    any = true;
  }
  return v;
}

bool Verification::ok() const {
  return received == expected && distinct == expected && duplicates == 0 && out_of_range == 0 &&
         bad_payload == 0 && rows_left == 0 && (expected == 0 || (min_id == 0 && max_id == expected - 1));
}

std::string Verification::describe() const {
  std::string s = "received " + std::to_string(received) + "/" + std::to_string(expected) +
                  ", distinct " + std::to_string(distinct) + ", min " + std::to_string(min_id) +
                  ", max " + std::to_string(max_id);
  if (duplicates) s += ", DUPLICATES " + std::to_string(duplicates);
  if (distinct < expected) s += ", MISSING " + std::to_string(expected - distinct);
  if (out_of_range) s += ", UNKNOWN IDS " + std::to_string(out_of_range);
  if (bad_payload) s += ", CORRUPT PAYLOADS " + std::to_string(bad_payload);
  if (rows_left) s += ", ROWS LEFT IN TABLE " + std::to_string(rows_left);
  return s;
}

}  // namespace q4m::bench
