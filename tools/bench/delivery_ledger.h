// Exactly-once bookkeeping for one run: which message ids were delivered, how
// often, and whether their payloads were intact. Workers record concurrently
// (one atomic flag per id, no lock); verify() runs after all workers stopped.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace q4m::bench {

struct Verification {
  uint64_t expected = 0;
  uint64_t received = 0;      // deliveries, including duplicates
  uint64_t distinct = 0;
  uint64_t duplicates = 0;
  uint64_t out_of_range = 0;  // ids nobody sent
  uint64_t bad_payload = 0;
  uint64_t min_id = 0, max_id = 0;
  uint64_t rows_left = 0;     // rows still in the table after the run
  bool ok() const;
  std::string describe() const;  // one line; names every problem found
};

class DeliveryLedger {
 public:
  explicit DeliveryLedger(uint64_t expected);

  // Records one delivery of `id`; counts total deliveries.
  void record(uint64_t id, bool payload_ok);
  uint64_t received() const { return received_.load(std::memory_order_relaxed); }
  uint64_t expected() const { return expected_; }

  Verification verify(uint64_t rows_left) const;

 private:
  uint64_t expected_;
  std::unique_ptr<std::atomic<uint8_t>[]> seen_;
  std::atomic<uint64_t> received_{0};
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> out_of_range_{0};
  std::atomic<uint64_t> bad_payload_{0};
};

}  // namespace q4m::bench
