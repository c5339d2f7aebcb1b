// Helpers for cond_* tests: build schemas and payloads by hand, with column bytes
// encoded the way MariaDB stores them (formats per sql/compat56.cc, sql/field.cc).
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cond/condition.h"
#include "core/row/payload.h"

namespace cond_test {

using q4m::ColumnInfo;
using q4m::ColumnKind;
using q4m::TableSchema;

// Columns are added in order; nullable ones get consecutive bits of the null area.
class SchemaBuilder {
 public:
  explicit SchemaBuilder(std::string table = "db.q") { schema_.table_name = std::move(table); }
  SchemaBuilder& col(std::string name, ColumnKind kind, uint32_t length = 0, bool is_unsigned = false,
                     bool nullable = true, uint32_t decimals = 0) {
    ColumnInfo c;
    c.name = std::move(name);
    c.kind = kind;
    c.length = length;
    c.is_unsigned = is_unsigned;
    c.decimals = decimals;
    if (nullable) {
      c.null_byte = null_bits_ / 8;
      c.null_mask = static_cast<uint8_t>(1u << (null_bits_ % 8));
      null_bits_++;
      schema_.null_bytes = (null_bits_ + 7) / 8;
    }
    schema_.columns.push_back(c);
    return *this;
  }
  TableSchema build() const { return schema_; }

 private:
  TableSchema schema_;
  uint32_t null_bits_ = 0;
};

// Column values in table order; std::nullopt = SQL NULL.
inline std::string payload(const TableSchema& s, const std::vector<std::optional<std::string>>& values) {
  std::string nulls(s.null_bytes, '\0');
  for (size_t i = 0; i < values.size(); i++)
    if (!values[i]) nulls[s.columns[i].null_byte] |= static_cast<char>(s.columns[i].null_mask);
  std::string out;
  q4m::RowPayloadWriter w(&out);
  w.begin(nulls);
  for (const auto& v : values)
    if (v) w.add(*v);
  return out;
}

inline std::string le(uint64_t v, unsigned n) {
  std::string s;
  for (unsigned i = 0; i < n; i++) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}
inline std::string be(uint64_t v, unsigned n) {
  std::string s;
  for (unsigned i = n; i-- > 0;) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}

inline std::string int_bytes(int64_t v, unsigned len) { return le(static_cast<uint64_t>(v), len); }
inline std::string uint_bytes(uint64_t v, unsigned len) { return le(v, len); }
inline std::string year_bytes(int year) { return std::string(1, static_cast<char>(year == 0 ? 0 : year - 1900)); }
// Field_newdate: day | month << 5 | year << 9, 3 bytes little-endian.
inline std::string date_bytes(int y, int m, int d) { return le(static_cast<uint64_t>(d | m << 5 | y << 9), 3); }

// Fraction bytes of a given precision for a signed in-memory fraction (as
// my_*_packed_to_binary stores MY_PACKED_TIME_GET_FRAC_PART: C remainder, may be < 0).
inline std::string frac_bytes(int64_t frac, unsigned dec) {
  if (dec == 0) return "";
  if (dec <= 2) return be(static_cast<uint64_t>(frac / 10000), 1);
  if (dec <= 4) return be(static_cast<uint64_t>(frac / 100), 2);
  return be(static_cast<uint64_t>(frac), 3);
}

// DATETIME(dec): 5 bytes BE of 0x8000000000 + ((y*13+m) << 5 | d) << 17 | h << 12 | mi << 6 | s,
// then the fraction.
inline std::string datetime_bytes(int y, int mo, int d, int h, int mi, int s, unsigned dec = 0, int64_t usec = 0) {
  int64_t ymd = (static_cast<int64_t>(y) * 13 + mo) << 5 | d;
  int64_t intpart = ymd << 17 | h << 12 | mi << 6 | s;
  return be(static_cast<uint64_t>(intpart + 0x8000000000LL), 5) + frac_bytes(usec, dec);
}

// TIMESTAMP(dec): 4 bytes BE seconds, then the fraction.
inline std::string timestamp_bytes(uint32_t secs, unsigned dec = 0, int64_t usec = 0) {
  return be(secs, 4) + frac_bytes(usec, dec);
}

// TIME(dec), per my_time_packed_to_binary: nr = +-((hms << 24) + usec).
inline std::string time_bytes(bool negative, int h, int m, int s, unsigned dec = 0, int64_t usec = 0) {
  int64_t hms = static_cast<int64_t>(h) << 12 | m << 6 | s;
  int64_t nr = (hms << 24) + usec;
  if (negative) nr = -nr;
  if (dec >= 5) return be(static_cast<uint64_t>(nr + 0x800000000000LL), 6);
  int64_t intpart = nr >> 24;            // arithmetic shift, as MY_PACKED_TIME_GET_INT_PART
  int64_t frac = nr % (int64_t{1} << 24);  // C remainder, as MY_PACKED_TIME_GET_FRAC_PART
  return be(static_cast<uint64_t>(intpart + 0x800000), 3) + frac_bytes(frac, dec);
}

inline std::string float_bytes(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return le(b, 4);
}
inline std::string double_bytes(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return le(b, 8);
}

inline std::shared_ptr<const q4m::RowFilter> compile_ok(const std::string& expr, const TableSchema& s) {
  std::shared_ptr<const q4m::RowFilter> f;
  q4m::Status st = q4m::cond::compile(expr, s, &f);
  if (!st.ok()) std::fprintf(stderr, "  compile failed: %s\n", st.message().c_str());
  return st.ok() ? f : nullptr;
}

// "T", "F" or "N" (NULL) for `expr` on `row`, or "error: <message>".
inline std::string truth(const std::string& expr, const TableSchema& s, const std::string& row) {
  std::shared_ptr<const q4m::RowFilter> is_true, is_null;
  q4m::Status st = q4m::cond::compile("(" + expr + ") IS TRUE", s, &is_true);
  if (!st.ok()) return "error: " + st.message();
  st = q4m::cond::compile("(" + expr + ") IS NULL", s, &is_null);
  if (!st.ok()) return "error: " + st.message();
  if (is_true->matches(row)) return "T";
  return is_null->matches(row) ? "N" : "F";
}

inline std::string error_of(const std::string& expr, const TableSchema& s) {
  std::shared_ptr<const q4m::RowFilter> f;
  q4m::Status st = q4m::cond::compile(expr, s, &f);
  if (st.ok()) return "ok";
  if (st.code() != q4m::ErrorCode::kInvalid) return "wrong code: " + st.message();
  return st.message();
}

}  // namespace cond_test
