// Message payloads: derived from the message id, so a consumer can check the
// bytes it received without any shared state. Letters only: no SQL escaping.
#pragma once
#include <cstdint>
#include <string>

namespace q4m::bench {

class PayloadSpec {
 public:
  PayloadSpec(uint32_t bytes, bool var_length) : bytes_(bytes), var_length_(var_length) {}

  bool enabled() const { return bytes_ > 0; }
  uint32_t max_bytes() const { return bytes_; }
  uint32_t length_of(uint64_t id) const;
  // Appends the payload of message `id` to `out`.
  void append(uint64_t id, std::string* out) const;
  bool matches(uint64_t id, const char* data, unsigned long len) const;

 private:
  uint32_t bytes_;
  bool var_length_;
};

}  // namespace q4m::bench
