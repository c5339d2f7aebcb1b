#include "payload.h"

namespace q4m::bench {

namespace {

// splitmix64: a cheap, well-mixed hash so variable lengths look random but are
// reproducible from the id alone.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

char byte_at(uint64_t id, uint32_t i) { return static_cast<char>('a' + (id + i) % 26); }

}  // namespace

uint32_t PayloadSpec::length_of(uint64_t id) const {
  if (!var_length_ || bytes_ == 0) return bytes_;
  return static_cast<uint32_t>(mix(id) % bytes_);
}

void PayloadSpec::append(uint64_t id, std::string* out) const {
  uint32_t n = length_of(id);
  out->reserve(out->size() + n);
  for (uint32_t i = 0; i < n; ++i) out->push_back(byte_at(id, i));
}

bool PayloadSpec::matches(uint64_t id, const char* data, unsigned long len) const {
  if (len != length_of(id)) return false;
  for (unsigned long i = 0; i < len; ++i)
    if (data[i] != byte_at(id, static_cast<uint32_t>(i))) return false;
  return true;
}

}  // namespace q4m::bench
