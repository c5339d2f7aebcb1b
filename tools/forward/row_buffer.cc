#include "row_buffer.h"

#include <cstring>

namespace q4m::forward {
namespace {

// Picks the C representation that carries a column's values without conversion loss.
void choose_wire_type(const MYSQL_FIELD& field, ColumnValue* c) {
  c->is_unsigned = (field.flags & UNSIGNED_FLAG) != 0;
  c->fixed_size = true;
  switch (field.type) {
    case MYSQL_TYPE_TINY:
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG:
    case MYSQL_TYPE_YEAR:
      c->wire_type = MYSQL_TYPE_LONGLONG;
      c->data.resize(sizeof(long long));
      return;
    case MYSQL_TYPE_FLOAT:
      c->wire_type = MYSQL_TYPE_FLOAT;
      c->data.resize(sizeof(float));
      return;
    case MYSQL_TYPE_DOUBLE:
      c->wire_type = MYSQL_TYPE_DOUBLE;
      c->data.resize(sizeof(double));
      return;
    case MYSQL_TYPE_DATE:
    case MYSQL_TYPE_NEWDATE:
      c->wire_type = MYSQL_TYPE_DATE;
      c->data.resize(sizeof(MYSQL_TIME));
      return;
    case MYSQL_TYPE_TIME:
    case MYSQL_TYPE_DATETIME:
    case MYSQL_TYPE_TIMESTAMP:
      c->wire_type = field.type;
      c->data.resize(sizeof(MYSQL_TIME));
      return;
    case MYSQL_TYPE_DECIMAL:
    case MYSQL_TYPE_NEWDECIMAL:
      c->wire_type = MYSQL_TYPE_NEWDECIMAL;  // exact decimal text
      break;
    default:
      // Bytes of a binary column (BLOB, BINARY, BIT, GEOMETRY) go as BLOB: the server stores
      // them unconverted. Text goes as STRING: utf8mb4 converted to the column's charset.
      c->wire_type = field.charsetnr == 63 ? MYSQL_TYPE_BLOB : MYSQL_TYPE_STRING;
      break;
  }
  c->fixed_size = false;
  c->data.resize(64);
}

}  // namespace

void RowBuffer::configure(MYSQL_STMT* stmt) {
  columns_.clear();
  MYSQL_RES* meta = mysql_stmt_result_metadata(stmt);
  if (!meta) return;
  unsigned n = mysql_num_fields(meta);
  MYSQL_FIELD* fields = mysql_fetch_fields(meta);
  columns_.resize(n);
  for (unsigned i = 0; i < n; ++i) choose_wire_type(fields[i], &columns_[i]);
  mysql_free_result(meta);
}

bool RowBuffer::bind_result(MYSQL_STMT* stmt) {
  MYSQL_RES* meta = mysql_stmt_result_metadata(stmt);
  MYSQL_FIELD* fields = meta ? mysql_fetch_fields(meta) : nullptr;
  result_binds_.assign(columns_.size(), MYSQL_BIND{});
  for (size_t i = 0; i < columns_.size(); ++i) {
    ColumnValue& c = columns_[i];
    if (!c.fixed_size && fields && fields[i].max_length + 1 > c.data.size())
      c.data.resize(fields[i].max_length + 1);
    MYSQL_BIND& b = result_binds_[i];
    b.buffer_type = c.wire_type;
    b.buffer = c.data.data();
    b.buffer_length = c.data.size();
    b.length = &c.length;
    b.is_null = &c.is_null;
    b.error = &c.truncated;
    b.is_unsigned = c.is_unsigned;
  }
  if (meta) mysql_free_result(meta);
  return mysql_stmt_bind_result(stmt, result_binds_.data()) == 0;
}

bool RowBuffer::refetch_truncated(MYSQL_STMT* stmt) {
  for (size_t i = 0; i < columns_.size(); ++i) {
    ColumnValue& c = columns_[i];
    if (!c.truncated || c.fixed_size) continue;
    c.data.resize(c.length + 1);
    MYSQL_BIND b{};
    b.buffer_type = c.wire_type;
    b.buffer = c.data.data();
    b.buffer_length = c.data.size();
    b.length = &c.length;
    b.is_null = &c.is_null;
    if (mysql_stmt_fetch_column(stmt, &b, static_cast<unsigned>(i), 0) != 0) return false;
    c.truncated = 0;
  }
  return true;
}

size_t RowBuffer::value_bytes(size_t count) const {
  size_t bytes = 0;
  for (size_t i = 0; i < count; ++i) bytes += columns_[i].fixed_size ? columns_[i].data.size() : columns_[i].length;
  return bytes;
}

void RowBuffer::append_param_binds(size_t count, std::vector<MYSQL_BIND>* binds) {
  const size_t base = binds->size();
  binds->resize(base + count, MYSQL_BIND{});
  for (size_t i = 0; i < count; ++i) {
    ColumnValue& c = columns_[i];
    if (c.wire_type == MYSQL_TYPE_TIME && !c.is_null) {
      // Fetching puts a TIME's whole hours (up to 838) in `hour`, but the client library
      // sends `hour` as one byte and the days separately: move whole days into `day`.
      // Idempotent, so a retried INSERT sends the same value.
      auto* t = reinterpret_cast<MYSQL_TIME*>(c.data.data());
      t->day += t->hour / 24;
      t->hour %= 24;
    }
    MYSQL_BIND& b = (*binds)[base + i];
    b.buffer_type = c.wire_type;
    b.buffer = c.data.data();
    b.buffer_length = c.fixed_size ? c.data.size() : c.length;
    b.length = c.fixed_size ? nullptr : &c.length;
    b.is_null = &c.is_null;
    b.is_unsigned = c.is_unsigned;
  }
}

}  // namespace q4m::forward
