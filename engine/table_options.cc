#define MYSQL_SERVER 1
#include "table_options.h"

#include <sql_class.h>
#include <field.h>
#include <table.h>

#include "schema.h"

namespace q4m_engine {

ha_create_table_option queue_table_options[] = {
    HA_TOPTION_STRING("VISIBLE_AT_COLUMN", visible_at_column),
    HA_TOPTION_END,
};

bool visible_at_column_of(const TABLE_SHARE* share, std::shared_ptr<const q4m::VisibleAtColumn>* out,
                          std::string* error) {
  out->reset();
  const char* name = share->option_struct ? share->option_struct->visible_at_column : nullptr;
  if (!name || !*name) return true;
  for (uint i = 0; i < share->fields; i++) {
    const Field* f = share->field[i];
    if (my_strcasecmp(system_charset_info, f->field_name.str, name) != 0) continue;
    if (f->real_type() != MYSQL_TYPE_TIMESTAMP2) {
      char type_buf[MAX_FIELD_WIDTH];
      String type(type_buf, sizeof(type_buf), system_charset_info);
      f->sql_type(type);
      *error = std::string("VISIBLE_AT_COLUMN: column `") + f->field_name.str + "` is " +
               std::string(type.ptr(), type.length()) + ", not a TIMESTAMP";
      return false;
    }
    auto column = std::make_shared<q4m::VisibleAtColumn>();
    column->schema = schema_of(share);
    column->column = i;
    *out = std::move(column);
    return true;
  }
  *error = std::string("VISIBLE_AT_COLUMN: the table has no column `") + name + "`";
  return false;
}

std::shared_ptr<const q4m::VisibleAtColumn> visible_at_column_of(const TABLE_SHARE* share) {
  std::shared_ptr<const q4m::VisibleAtColumn> column;
  std::string error;
  return visible_at_column_of(share, &column, &error) ? column : nullptr;
}

}  // namespace q4m_engine
