// Holds one fetched row in binary-protocol form so it can be sent on unchanged as the
// parameters of the INSERT at the destination (no text round trip: floats, decimals,
// dates and bytes arrive exactly as stored).
#pragma once

#include <mysql.h>

#include <vector>

namespace q4m::forward {

struct ColumnValue {
  enum_field_types wire_type = MYSQL_TYPE_STRING;  // fetch and send as this type
  bool is_unsigned = false;
  bool fixed_size = false;     // numbers and dates: buffer never resized
  std::vector<char> data;
  unsigned long length = 0;
  my_bool is_null = 0;
  my_bool truncated = 0;
};

class RowBuffer {
 public:
  // One column per field of the statement's result metadata.
  void configure(MYSQL_STMT* stmt);
  size_t size() const { return columns_.size(); }
  const ColumnValue& column(size_t i) const { return columns_[i]; }

  // After mysql_stmt_store_result (with STMT_ATTR_UPDATE_MAX_LENGTH): sizes the buffers for
  // the stored rows and binds them as the statement's result.
  bool bind_result(MYSQL_STMT* stmt);
  // After a fetch that returned MYSQL_DATA_TRUNCATED: fetches the cut columns whole.
  bool refetch_truncated(MYSQL_STMT* stmt);

  // Copies the values of a fetched row (reusing this buffer's allocations).
  void assign_values(const RowBuffer& from) { columns_ = from.columns_; }
  // Bytes of the first `count` values, as sent.
  size_t value_bytes(size_t count) const;

  // Parameter binds for the first `count` columns, pointing into this buffer, appended.
  void append_param_binds(size_t count, std::vector<MYSQL_BIND>* binds);

 private:
  std::vector<ColumnValue> columns_;
  std::vector<MYSQL_BIND> result_binds_;
};

}  // namespace q4m::forward
