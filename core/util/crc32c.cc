#include "core/util/crc32c.h"

#include <cstring>

namespace q4m {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
      for (int s = 1; s < 8; s++) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

const Tables& tables() {
  static const Tables tab;
  return tab;
}

#if defined(__x86_64__)
// SSE4.2's crc32 instruction computes exactly CRC-32C, 8 bytes per instruction.
__attribute__((target("sse4.2"))) uint32_t extend_sse42(uint32_t crc, const unsigned char* p, size_t size) {
  uint64_t c = ~crc;
  for (; size >= 8; p += 8, size -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);  // x86 is little-endian: the same byte order as the tables
    c = __builtin_ia32_crc32di(c, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; size > 0; p++, size--) c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}

bool have_sse42() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#endif

}  // namespace

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t size) {
  const Tables& T = tables();
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  while (size >= 8) {  // 8 bytes per step; byte order independent of the host
    uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    uint32_t hi = uint32_t(p[4]) | uint32_t(p[5]) << 8 | uint32_t(p[6]) << 16 | uint32_t(p[7]) << 24;
    c = T.t[7][lo & 0xff] ^ T.t[6][(lo >> 8) & 0xff] ^ T.t[5][(lo >> 16) & 0xff] ^ T.t[4][lo >> 24] ^
        T.t[3][hi & 0xff] ^ T.t[2][(hi >> 8) & 0xff] ^ T.t[1][(hi >> 16) & 0xff] ^ T.t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size--) c = (c >> 8) ^ T.t[0][(c ^ *p++) & 0xff];
  return ~c;
}

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
#if defined(__x86_64__)
  if (have_sse42()) return extend_sse42(crc, static_cast<const unsigned char*>(data), size);
#endif
  return crc32c_extend_portable(crc, data, size);
}

}  // namespace q4m
