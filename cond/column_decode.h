// Payload column bytes (storage/row_payload.h) -> the values conditions compare.
// Lengths are checked by the payload walk (WalkStep::min_len/max_len) before any
// of these run. Temporal formats are MariaDB's on-disk ones (sql/compat56.cc,
// Field_newdate, Field_year); fractional seconds are ignored.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

#include "cond/program.h"

namespace q4m::cond::decode {

inline uint64_t big_endian(const unsigned char* p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

// kInt: little-endian, 1..8 bytes, sign- or zero-extended from its width.
inline Int integer(const unsigned char* p, uint32_t len, bool is_unsigned) {
  uint64_t v = 0;
  for (uint32_t i = len; i-- > 0;) v = v << 8 | p[i];
  if (is_unsigned) return static_cast<Int>(v);
  const unsigned bits = len * 8;
  if (bits < 64 && (v >> (bits - 1)) & 1) v |= ~uint64_t{0} << bits;  // sign-extend
  return static_cast<Int>(static_cast<int64_t>(v));
}

// kYear: one byte, year - 1900; 0 stands for year 0000.
inline Int year(const unsigned char* p) { return p[0] == 0 ? 0 : 1900 + p[0]; }

// kDate: 3 bytes little-endian, day | month << 5 | year << 9 -> YYYYMMDD.
inline Int date(const unsigned char* p) {
  uint32_t v = p[0] | p[1] << 8 | static_cast<uint32_t>(p[2]) << 16;
  return static_cast<Int>(v >> 9) * 10000 + ((v >> 5) & 15) * 100 + (v & 31);
}

// hour << 12 | minute << 6 | second  ->  hhmmss
inline int64_t packed_hms(uint64_t hms) {
  return static_cast<int64_t>(hms >> 12) * 10000 + ((hms >> 6) & 63) * 100 + (hms & 63);
}

// kDatetime: 5 big-endian bytes = 0x8000000000 + ((year*13+month) << 5 | day) << 17 | hms,
// then 0-3 bytes of fraction (ignored) -> YYYYMMDDhhmmss.
inline Int datetime(const unsigned char* p) {
  int64_t packed = static_cast<int64_t>(big_endian(p, 5)) - 0x8000000000LL;
  bool negative = packed < 0;  // never written by MariaDB; decoded symmetrically
  uint64_t m = negative ? static_cast<uint64_t>(-packed) : static_cast<uint64_t>(packed);
  uint64_t ymd = m >> 17, ym = ymd >> 5;
  Int v = static_cast<Int>(ym / 13) * 10000000000LL + static_cast<Int>(ym % 13) * 100000000LL +
          static_cast<Int>(ymd & 31) * 1000000 + packed_hms(m & 0x1ffff);
  return negative ? -v : v;
}

// kTimestamp: 4 big-endian bytes of seconds since the epoch (UTC), then fraction.
inline Int timestamp(const unsigned char* p) { return static_cast<Int>(big_endian(p, 4)); }

// kTime: 3 big-endian bytes of 0x800000 + signed (hour << 12 | minute << 6 | second)
// plus 1-2 fraction bytes, or (TIME(5), TIME(6)) 6 bytes of 0x800000000000 + signed
// (hms << 24 | microseconds). -> signed hhmmss, truncated toward zero.
inline Int time(const unsigned char* p, uint32_t len) {
  int64_t whole;  // signed hour/minute/second part, truncated toward zero
  if (len >= 6) {
    int64_t packed = static_cast<int64_t>(big_endian(p, 6)) - 0x800000000000LL;
    whole = packed < 0 ? -((-packed) >> 24) : packed >> 24;
  } else {
    whole = static_cast<int64_t>(big_endian(p, 3)) - 0x800000;
    uint64_t frac = len == 4 ? p[3] : len == 5 ? big_endian(p + 3, 2) : 0;
    // Negative values store the fraction complemented, borrowing one second.
    if (whole < 0 && frac != 0) whole++;
  }
  return whole < 0 ? -static_cast<Int>(packed_hms(static_cast<uint64_t>(-whole)))
                   : static_cast<Int>(packed_hms(static_cast<uint64_t>(whole)));
}

inline double float32(const unsigned char* p) {
  uint32_t bits = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline double float64(const unsigned char* p) {
  uint64_t bits = 0;
  for (int i = 8; i-- > 0;) bits = bits << 8 | p[i];
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// kChar: CHAR's space padding is not part of the value.
inline std::string_view char_value(const unsigned char* p, uint32_t len) {
  while (len > 0 && p[len - 1] == ' ') len--;
  return std::string_view(reinterpret_cast<const char*>(p), len);
}

}  // namespace q4m::cond::decode
