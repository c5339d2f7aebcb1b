// The byte layout of one stored row, shared by the engine (which encodes MariaDB
// records into it) and cond/ (which decodes columns to evaluate subscriptions).
// The storage layer itself treats payloads as opaque bytes.
//
//   payload := null_bytes (TableSchema::null_bytes bytes, copied from the record's
//              null-flag area)  column*  (one per NON-NULL column, in table order)
//   column  := varint(length) bytes
//
// Column bytes by kind (what the engine writes):
//   kInt      little-endian two's complement/unsigned, `length` = 1,2,3,4 or 8 bytes
//   kYear     1 byte, year-1900 (0 = 0000)
//   kDate     3 bytes little-endian: day | month << 5 | year << 9
//   kDatetime MariaDB DATETIME(n) binary format (big-endian, 5 + (n+1)/2 bytes)
//   kTimestamp MariaDB TIMESTAMP(n) binary format (big-endian seconds since epoch UTC, 4 + (n+1)/2)
//   kTime     MariaDB TIME(n) binary format (3 + (n+1)/2 bytes)
//   kChar     the fixed-width field bytes (space padded)
//   kVarchar  the value bytes only (no length prefix)
//   kBlob     the value bytes only (BLOB/TEXT/JSON)
//   kFloat, kDouble   IEEE little-endian (4 / 8 bytes)
//   kOther    the record's raw field bytes (DECIMAL, ENUM, SET, BIT, INET6, UUID, ...)
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace q4m {

enum class ColumnKind { kInt, kYear, kDate, kDatetime, kTimestamp, kTime, kChar, kVarchar, kBlob,
                        kFloat, kDouble, kOther };

struct ColumnInfo {
  std::string name;          // as declared (compared case-insensitively)
  ColumnKind kind = ColumnKind::kOther;
  uint32_t length = 0;       // fixed byte length where the kind has one
  bool is_unsigned = false;
  uint32_t decimals = 0;     // fractional second digits of temporal kinds
  uint32_t null_byte = 0;    // offset in the null_bytes area
  uint8_t null_mask = 0;     // 0 = NOT NULL column
  bool compressed = false;   // a COMPRESSED column: its bytes are not the value
  bool row_id = false;       // the ROW_ID_COLUMN: it stores 0 and reads as the row's id
  // kChar/kVarchar/kBlob under a collation: compares two values as SQL does (<0, 0, >0:
  // 'a' = 'A' under a _ci collation, trailing spaces ignored under a PAD SPACE one). Null:
  // byte for byte (BINARY, VARBINARY, BLOB). Made by the engine; the core only calls it.
  std::function<int(std::string_view, std::string_view)> collate_compare{};
  std::string collation{};   // its name, for messages
  // A string literal of a condition, which arrives in the client's character set, into this
  // column's (as SQL converts it before comparing); false if it has a character the column's
  // cannot hold (SQL then refuses the comparison). Null: taken as it is (same character set,
  // or a binary column).
  std::function<bool(std::string_view, std::string*)> literal_to_column{};
};

struct TableSchema {
  std::string table_name;    // "db.table", for error messages
  uint32_t null_bytes = 0;
  std::vector<ColumnInfo> columns;
};

// Encoder: begin() with the null area, then add() each non-null column in order.
class RowPayloadWriter {
 public:
  explicit RowPayloadWriter(std::string* out) : out_(out) {}
  void begin(std::string_view null_bytes) { out_->clear(); out_->append(null_bytes); }
  void add(std::string_view column_bytes) {
    uint64_t n = column_bytes.size();
    while (n >= 0x80) { out_->push_back(static_cast<char>((n & 0x7f) | 0x80)); n >>= 7; }
    out_->push_back(static_cast<char>(n));
    out_->append(column_bytes);
  }
 private:
  std::string* out_;
};

// Decoder: splits a payload into per-column views (null columns give is_null).
class RowPayloadView {
 public:
  struct Column { bool is_null = true; std::string_view bytes; };
  // Returns false if the payload is malformed for this schema.
  static bool decode(const TableSchema& schema, std::string_view payload, std::vector<Column>* out) {
    if (payload.size() < schema.null_bytes) return false;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(payload.data());
    size_t pos = schema.null_bytes;
    out->assign(schema.columns.size(), Column());
    for (size_t i = 0; i < schema.columns.size(); i++) {
      const ColumnInfo& c = schema.columns[i];
      if (c.null_mask && (p[c.null_byte] & c.null_mask)) continue;
      uint64_t len = 0;
      for (int shift = 0;; shift += 7) {
        if (pos >= payload.size() || shift > 56) return false;
        unsigned char b = p[pos++];
        len |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
      }
      if (len > payload.size() - pos) return false;
      (*out)[i].is_null = false;
      (*out)[i].bytes = payload.substr(pos, len);
      pos += len;
    }
    return pos == payload.size();
  }
};

}  // namespace q4m
