#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <field.h>
#include <table.h>

#include <cstring>

#include "core/row/payload.h"
#include "engine/row_codec.h"
#include "engine/schema.h"

namespace q4m_engine {

namespace {

std::string_view bytes(const uchar* p, size_t n) {
  return std::string_view(reinterpret_cast<const char*>(p), n);
}

// Reads one varint-prefixed column from payload at *pos.
bool next_column(std::string_view payload, size_t* pos, std::string_view* out) {
  uint64_t len = 0;
  for (int shift = 0;; shift += 7) {
    if (*pos >= payload.size() || shift > 56) return false;
    unsigned char b = static_cast<unsigned char>(payload[(*pos)++]);
    len |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  if (len > payload.size() - *pos) return false;
  *out = payload.substr(*pos, len);
  *pos += len;
  return true;
}

// Where field f's null bit is in a record (null_ptr points into record[0]).
size_t null_byte_of(const TABLE* table, const Field* f) { return static_cast<size_t>(f->null_ptr - table->record[0]); }

}  // namespace

static bool decode_columns(const TABLE* table, std::string_view payload, uchar* record);

void encode_row(const TABLE* table, const uchar* record, int id_column, std::string* out) {
  const my_ptrdiff_t offset = record - table->record[0];
  q4m::RowPayloadWriter writer(out);
  const Field* id_field = id_column >= 0 ? table->field[id_column] : nullptr;
  if (id_field && id_field->null_ptr) {  // stored as 0, not NULL
    std::string nulls(reinterpret_cast<const char*>(record), table->s->null_bytes);
    nulls[null_byte_of(table, id_field)] &= static_cast<char>(~id_field->null_bit);
    writer.begin(nulls);
  } else {
    writer.begin(bytes(record, table->s->null_bytes));
  }
  static const uchar kZero[8] = {};
  for (Field** fp = table->field; *fp; fp++) {
    const Field* f = *fp;
    if (f == id_field) {
      writer.add(bytes(kZero, sizeof(kZero)));
      continue;
    }
    if (f->is_null_in_record(record)) continue;
    const uchar* p = f->ptr + offset;
    switch (column_kind(f)) {
      case q4m::ColumnKind::kVarchar: {
        auto* v = static_cast<const Field_varstring*>(f);
        writer.add(bytes(v->get_data(p), v->get_length(p)));
        break;
      }
      case q4m::ColumnKind::kBlob: {
        auto* b = static_cast<const Field_blob*>(f);
        writer.add(bytes(b->get_ptr(p), b->get_length(p)));
        break;
      }
      default:
        writer.add(bytes(p, f->pack_length()));
    }
  }
}

uint64_t asked_id(const TABLE* table, const uchar* record, int id_column) {
  if (id_column < 0) return 0;
  const Field* f = table->field[id_column];
  if (f->is_null_in_record(record)) return 0;
  return uint8korr(f->ptr + (record - table->record[0]));
}

bool decode_row(const TABLE* table, std::string_view payload, int id_column, uint64_t id, uchar* record) {
  if (!decode_columns(table, payload, record)) return false;
  if (id_column < 0) return true;
  Field* f = table->field[id_column];
  uchar* p = f->ptr + (record - table->record[0]);
  int8store(p, id);
  if (f->null_ptr) {
    uchar& nulls = record[null_byte_of(table, f)];
    nulls = id ? (nulls & ~f->null_bit) : (nulls | f->null_bit);
  }
  return true;
}

// The record's columns from the payload, the ROW_ID_COLUMN's stored 0 too.
static bool decode_columns(const TABLE* table, std::string_view payload, uchar* record) {
  const TABLE_SHARE* share = table->s;
  if (payload.size() < share->null_bytes) return false;
  // Start from the defaults so NULL columns hold well-defined bytes.
  memcpy(record, share->default_values, share->reclength);
  memcpy(record, payload.data(), share->null_bytes);
  const my_ptrdiff_t offset = record - table->record[0];
  size_t pos = share->null_bytes;
  for (Field** fp = table->field; *fp; fp++) {
    Field* f = *fp;
    if (f->is_null_in_record(record)) continue;
    std::string_view col;
    if (!next_column(payload, &pos, &col)) return false;
    uchar* p = f->ptr + offset;
    switch (column_kind(f)) {
      case q4m::ColumnKind::kVarchar: {
        auto* v = static_cast<Field_varstring*>(f);
        if (col.size() > v->field_length) return false;
        if (v->length_bytes == 1)
          p[0] = static_cast<uchar>(col.size());
        else
          int2store(p, static_cast<uint16>(col.size()));
        memcpy(p + v->length_bytes, col.data(), col.size());
        break;
      }
      case q4m::ColumnKind::kBlob: {
        auto* b = static_cast<Field_blob*>(f);
        uint packlength = b->pack_length_no_ptr();
        if (packlength < 4 && (col.size() >> (8 * packlength)) != 0) return false;
        b->store_length(p, packlength, static_cast<uint32>(col.size()));
        const uchar* data = reinterpret_cast<const uchar*>(col.data());
        memcpy(p + packlength, &data, sizeof(data));
        break;
      }
      default:
        if (col.size() != f->pack_length()) return false;
        memcpy(p, col.data(), col.size());
    }
  }
  return pos == payload.size();
}

}  // namespace q4m_engine
