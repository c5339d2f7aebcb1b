#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <field.h>
#include <table.h>

#include "engine/schema.h"
#include "engine/table_options.h"

namespace q4m_engine {

q4m::ColumnKind column_kind(const Field* field) {
  using q4m::ColumnKind;
  if (field->flags & BLOB_FLAG) return ColumnKind::kBlob;  // BLOB/TEXT/JSON/GEOMETRY
  switch (field->real_type()) {
    case MYSQL_TYPE_TINY:
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_LONGLONG: return ColumnKind::kInt;
    case MYSQL_TYPE_YEAR: return ColumnKind::kYear;
    case MYSQL_TYPE_NEWDATE: return ColumnKind::kDate;
    case MYSQL_TYPE_DATETIME2: return ColumnKind::kDatetime;
    case MYSQL_TYPE_TIMESTAMP2: return ColumnKind::kTimestamp;
    case MYSQL_TYPE_TIME2: return ColumnKind::kTime;
    case MYSQL_TYPE_STRING:
      // Plugin types stored like CHAR (INET6, UUID) hold binary values, not text: the same
      // bytes in the payload, but conditions and group keys must not read them as a string.
      // (A pointer compare: the row codec asks this for every field of every row.)
      return field->type_handler() == &type_handler_string ? ColumnKind::kChar : ColumnKind::kOther;
    case MYSQL_TYPE_VARCHAR:
    case MYSQL_TYPE_VARCHAR_COMPRESSED: return ColumnKind::kVarchar;
    case MYSQL_TYPE_FLOAT: return ColumnKind::kFloat;
    case MYSQL_TYPE_DOUBLE: return ColumnKind::kDouble;
    default: return ColumnKind::kOther;  // DECIMAL, ENUM, SET, BIT, old temporal formats, ...
  }
}

q4m::TableSchema schema_of(const TABLE_SHARE* share) {
  q4m::TableSchema schema;
  schema.table_name.assign(share->db.str, share->db.length);
  schema.table_name += '.';
  schema.table_name.append(share->table_name.str, share->table_name.length);
  schema.null_bytes = share->null_bytes;
  const uchar* record = share->default_values;
  const int row_id = row_id_column_of(share);
  for (uint i = 0; i < share->fields; i++) {
    const Field* f = share->field[i];
    q4m::ColumnInfo c;
    c.name.assign(f->field_name.str, f->field_name.length);
    c.kind = column_kind(f);
    bool variable = c.kind == q4m::ColumnKind::kVarchar || c.kind == q4m::ColumnKind::kBlob;
    c.length = variable ? 0 : f->pack_length();
    c.is_unsigned = (f->flags & UNSIGNED_FLAG) != 0;
    c.decimals = f->decimals();
    c.compressed = f->compression_method() != nullptr;
    c.row_id = static_cast<int>(i) == row_id;
    const bool text = c.kind == q4m::ColumnKind::kChar || variable;
    if (const CHARSET_INFO* cs = text ? f->charset() : nullptr; cs && cs != &my_charset_bin) {
      c.collate_compare = [cs](std::string_view a, std::string_view b) {
        return cs->coll->strnncollsp(cs, reinterpret_cast<const uchar*>(a.data()), a.size(),
                                     reinterpret_cast<const uchar*>(b.data()), b.size());
      };
      c.collation = cs->coll_name.str;
    }
    if (f->null_ptr) {
      c.null_byte = static_cast<uint32_t>(f->null_ptr - record);
      c.null_mask = f->null_bit;
    }
    schema.columns.push_back(std::move(c));
  }
  return schema;
}

void convert_literals_from(const CHARSET_INFO* literal_charset, const TABLE_SHARE* share,
                           q4m::TableSchema* schema) {
  if (!literal_charset || literal_charset == &my_charset_bin) return;  // bytes as they are
  for (uint i = 0; i < share->fields && i < schema->columns.size(); i++) {
    q4m::ColumnInfo& c = schema->columns[i];
    if (!c.collate_compare) continue;  // not text, or binary
    const CHARSET_INFO* to = share->field[i]->charset();
    if (my_charset_same(literal_charset, to)) continue;
    c.literal_to_column = [from = literal_charset, to](std::string_view literal, std::string* out) {
      String converted;
      uint errors = 0;
      if (converted.copy(literal.data(), literal.size(), from, to, &errors)) return false;
      out->assign(converted.ptr(), converted.length());
      return errors == 0;
    };
  }
}

}  // namespace q4m_engine
