#define MYSQL_SERVER 1
#include "engine/table_options.h"

#include <sql_class.h>
#include <field.h>
#include <table.h>

#include "core/policy/token_bucket.h"
#include "engine/schema.h"
#include <create_options.h>

namespace q4m_engine {

ha_create_table_option queue_table_options[] = {
    HA_TOPTION_STRING("VISIBLE_AT_COLUMN", visible_at_column),
    // Up to 100 years, so that the milliseconds fit with room to spare.
    HA_TOPTION_NUMBER("MESSAGE_TTL", message_ttl, 0, 0, 3153600000ULL, 1),
    // Delivery counts saturate at 65535.
    HA_TOPTION_NUMBER("MAX_DELIVERIES", max_deliveries, 0, 0, 65535, 1),
    HA_TOPTION_STRING("MESSAGE_GROUP_COLUMN", message_group_column),
    HA_TOPTION_STRING("DEDUP_COLUMN", dedup_column),
    // SQS's deduplication interval by default; up to 30 days (every key of the window is
    // kept in memory).
    HA_TOPTION_NUMBER("DEDUP_WINDOW", dedup_window, 300, 1, 2592000, 1),
    // The limits (core/policy/message_groups.h, table_limits.h). A concurrency is a window of
    // rows kept in memory; a burst is a count of tokens.
    HA_TOPTION_NUMBER("GROUP_CONCURRENCY", group_concurrency, 1, 0, 1000000, 1),
    HA_TOPTION_STRING("GROUP_RATE", group_rate),
    HA_TOPTION_NUMBER("GROUP_BURST", group_burst, 1, 1, 1000000000, 1),
    HA_TOPTION_NUMBER("MAX_IN_FLIGHT", max_in_flight, 0, 0, 1000000000, 1),
    HA_TOPTION_STRING("MAX_RATE", max_rate),
    HA_TOPTION_NUMBER("MAX_BURST", max_burst, 1, 1, 1000000000, 1),
    HA_TOPTION_STRING("ROW_ID_COLUMN", row_id_column),
    // History of ended rows (core/table/history.cc): up to a year; each row kept costs memory.
    HA_TOPTION_NUMBER("HISTORY_RETENTION", history_retention, 0, 0, 31536000, 1),
    HA_TOPTION_END,
};

namespace {

// The position of the column an option names, or -1 with *error (the option has no
// column, or none of that name).
int column_named(const TABLE_SHARE* share, const char* option, const char* name, std::string* error) {
  for (uint i = 0; i < share->fields; i++)
    if (my_strcasecmp(system_charset_info, share->field[i]->field_name.str, name) == 0) return static_cast<int>(i);
  *error = std::string(option) + ": the table has no column `" + name + "`";
  return -1;
}

// Group keys under the collation of a text column (one schema_of() gave a collate_compare):
// values it calls equal ('A' and 'a' under a case-insensitive one, 'a' and 'a ' under a PAD
// SPACE one) become the same sort key, as GROUP BY and a unique index would see them.
std::function<void(std::string_view, std::string*)> collated_key_of(const Field* f) {
  const CHARSET_INFO* cs = f->charset();
  return [cs](std::string_view value, std::string* key) {
    size_t length = value.size();
    if (!(cs->state & MY_CS_NOPAD)) length = cs->lengthsp(value.data(), length);
    const size_t chars = cs->numchars(value.data(), value.data() + length);
    // No limit on the number of weights (a character may expand to several: 'ß' is 'ss'
    // under utf8mb4_unicode_ci) and no padding; a key that fills the buffer may be cut
    // short, so it is made again in a bigger one.
    for (size_t room = cs->strnxfrmlen(chars * cs->mbmaxlen) + 8;; room *= 2) {
      key->resize(room);
      const size_t n = cs->strnxfrm(reinterpret_cast<uchar*>(key->data()), room, static_cast<uint>(room),
                                    reinterpret_cast<const uchar*>(value.data()), length, 0);
      if (n < room) {
        key->resize(n);
        return;
      }
    }
  };
}

// Column i's SQL type as SHOW CREATE TABLE writes it ("varchar(20)"), for messages.
// Field::sql_type() reads the session of the field's TABLE, which a share's own fields do
// not have (a VARCHAR's would crash the server): it needs an opened `table`; without one,
// the type's bare name.
std::string sql_type_of(const TABLE_SHARE* share, const TABLE* table, int i) {
  if (!table || !table->in_use || !table->field) {
    const Name name = share->field[i]->type_handler()->name();
    return std::string(name.ptr(), name.length());
  }
  char type_buf[MAX_FIELD_WIDTH];
  String type(type_buf, sizeof(type_buf), system_charset_info);
  table->field[i]->sql_type(type);
  return std::string(type.ptr(), type.length());
}

// The VISIBLE_AT_COLUMN of `share`: *out = null if the option is not set. False, with
// *error saying what is wrong (naming types as `table`'s fields do), if it names no column
// or not a TIMESTAMP column.
bool visible_at_column_of(const TABLE_SHARE* share, const TABLE* table,
                          std::shared_ptr<const q4m::VisibleAtColumn>* out, std::string* error) {
  out->reset();
  const char* name = share->option_struct ? share->option_struct->visible_at_column : nullptr;
  if (!name || !*name) return true;
  const int i = column_named(share, "VISIBLE_AT_COLUMN", name, error);
  if (i < 0) return false;
  const Field* f = share->field[i];
  if (f->real_type() != MYSQL_TYPE_TIMESTAMP2) {
    *error = std::string("VISIBLE_AT_COLUMN: column `") + f->field_name.str + "` is " + sql_type_of(share, table, i) +
             ", not a TIMESTAMP";
    return false;
  }
  auto column = std::make_shared<q4m::VisibleAtColumn>();
  column->schema = schema_of(share);
  column->column = static_cast<size_t>(i);
  *out = std::move(column);
  return true;
}

// The column a key option (MESSAGE_GROUP_COLUMN, DEDUP_COLUMN) of `share` names, the same
// way: false if it names no column, or a column whose values cannot be a key (BLOB/TEXT/JSON,
// FLOAT/DOUBLE, COMPRESSED). `what` names the key in messages ("a group key").
bool key_column_of(const TABLE_SHARE* share, const TABLE* table, const char* option, const char* name,
                   const char* what, std::shared_ptr<const q4m::KeyColumn>* out, std::string* error) {
  out->reset();
  if (!name || !*name) return true;
  const int i = column_named(share, option, name, error);
  if (i < 0) return false;
  auto column = std::make_shared<q4m::KeyColumn>();
  column->schema = schema_of(share);
  column->column = static_cast<size_t>(i);
  column->name = share->field[i]->field_name.str;
  // Keys are kept in memory: no unbounded values; no floating point (where 0 and -0 are
  // equal but stored differently); no compressed strings (their stored bytes are not the
  // value).
  const q4m::ColumnKind kind = column->schema.columns[i].kind;
  if (kind == q4m::ColumnKind::kBlob || kind == q4m::ColumnKind::kFloat || kind == q4m::ColumnKind::kDouble ||
      column->schema.columns[i].compressed) {
    const Field* f = share->field[i];
    *error = std::string(option) + ": column `" + f->field_name.str + "` is " + sql_type_of(share, table, i) + "; " +
             what + " must be an integer, CHAR, VARCHAR (not COMPRESSED), BINARY, VARBINARY, DECIMAL, ENUM or "
             "temporal column";
    return false;
  }
  // Columns without a collation (numbers, BINARY/VARBINARY, INET6, UUID): bytes as they are.
  if (column->schema.columns[i].collate_compare) column->collate = collated_key_of(share->field[i]);
  *out = std::move(column);
  return true;
}

bool message_group_column_of(const TABLE_SHARE* share, const TABLE* table,
                             std::shared_ptr<const q4m::KeyColumn>* out, std::string* error) {
  const char* name = share->option_struct ? share->option_struct->message_group_column : nullptr;
  return key_column_of(share, table, "MESSAGE_GROUP_COLUMN", name, "a group key", out, error);
}

bool dedup_column_of(const TABLE_SHARE* share, const TABLE* table, std::shared_ptr<const q4m::KeyColumn>* out,
                     std::string* error) {
  const char* name = share->option_struct ? share->option_struct->dedup_column : nullptr;
  return key_column_of(share, table, "DEDUP_COLUMN", name, "a dedup key", out, error);
}

// The ROW_ID_COLUMN of `share`: *out = -1 if the option is not set. False, with *error, if it
// names no column, a column that is not BIGINT UNSIGNED, or a column another option reads
// (the column's stored bytes are not its value: the row's id replaces them on every read).
bool row_id_column_of(const TABLE_SHARE* share, const TABLE* table, int* out, std::string* error) {
  *out = -1;
  const ha_table_option_struct* o = share->option_struct;
  const char* name = o ? o->row_id_column : nullptr;
  if (!name || !*name) return true;
  const int i = column_named(share, "ROW_ID_COLUMN", name, error);
  if (i < 0) return false;
  const Field* f = share->field[i];
  if (f->real_type() != MYSQL_TYPE_LONGLONG || !(f->flags & UNSIGNED_FLAG)) {
    *error = std::string("ROW_ID_COLUMN: column `") + f->field_name.str + "` is " + sql_type_of(share, table, i) +
             ", not BIGINT UNSIGNED (a row id)";
    return false;
  }
  const std::pair<const char*, const char*> others[] = {{"VISIBLE_AT_COLUMN", o->visible_at_column},
                                                        {"MESSAGE_GROUP_COLUMN", o->message_group_column},
                                                        {"DEDUP_COLUMN", o->dedup_column}};
  for (const auto& [option, other] : others) {
    if (other && my_strcasecmp(system_charset_info, other, f->field_name.str) == 0) {
      *error = std::string("ROW_ID_COLUMN: column `") + f->field_name.str + "` is the " + option +
               " too; the row id column holds no value of its own (it reads as the row's id)";
      return false;
    }
  }
  *out = i;
  return true;
}

// Whether the table definition spells out option `name` (not just its default).
bool option_given(const TABLE_SHARE* share, const char* name) {
  for (const engine_option_value* o = share->option_list; o; o = o->next)
    if (o->value.str && my_strcasecmp(system_charset_info, o->name.str, name) == 0) return true;
  return false;
}

// A rate option (GROUP_RATE, MAX_RATE) of `share` in hand-outs per second: 0 if not set.
// False, with *error naming the option, if it cannot be read or is zero; `given` (the
// definition spells it out) makes an empty text an error too ('' is no rate either).
bool rate_of(const char* option, const char* text, double* per_second,
             std::string* error, bool given = false) {
  *per_second = 0;
  if ((!text || !*text) && !given) return true;
  if (!text) text = "";
  std::string why;
  if (q4m::parse_rate(text, per_second, &why)) return true;
  *error = std::string(option) + ": " + why;
  return false;
}

}  // namespace

bool check_options(const TABLE* table, std::string* error) {
  const TABLE_SHARE* share = table->s;
  std::shared_ptr<const q4m::VisibleAtColumn> visible_at;
  if (!visible_at_column_of(share, table, &visible_at, error)) return false;
  std::shared_ptr<const q4m::KeyColumn> message_group;
  if (!message_group_column_of(share, table, &message_group, error)) return false;
  std::shared_ptr<const q4m::KeyColumn> dedup;
  if (!dedup_column_of(share, table, &dedup, error)) return false;
  int row_id = -1;
  if (!row_id_column_of(share, table, &row_id, error)) return false;
  if (!dedup && option_given(share, "DEDUP_WINDOW")) {  // it would be ignored
    *error = "DEDUP_WINDOW needs DEDUP_COLUMN, the column whose value tells a duplicate";
    return false;
  }
  const ha_table_option_struct* given = share->option_struct;
  double group_rate = 0, max_rate = 0;
  if (!rate_of("GROUP_RATE", given ? given->group_rate : nullptr, &group_rate, error,
               option_given(share, "GROUP_RATE")))
    return false;
  if (!rate_of("MAX_RATE", given ? given->max_rate : nullptr, &max_rate, error, option_given(share, "MAX_RATE")))
    return false;
  // Limits that would be ignored.
  for (const char* per_group : {"GROUP_CONCURRENCY", "GROUP_RATE", "GROUP_BURST"})
    if (!message_group && option_given(share, per_group)) {
      *error = std::string(per_group) + " needs MESSAGE_GROUP_COLUMN, the column whose value is the key it limits";
      return false;
    }
  if (group_rate == 0 && option_given(share, "GROUP_BURST")) {
    *error = "GROUP_BURST needs GROUP_RATE, the rate whose bucket it sizes";
    return false;
  }
  if (max_rate == 0 && option_given(share, "MAX_BURST")) {
    *error = "MAX_BURST needs MAX_RATE, the rate whose bucket it sizes";
    return false;
  }
  // The server takes a number option it cannot read (MESSAGE_TTL='2 days') for 0.
  struct NumberOption {
    const char* name;
    const char* expected;
  };
  static const NumberOption numbers[] = {
      {"MESSAGE_TTL", "a whole number of seconds (0 to 3153600000; 0 = never expire)"},
      {"MAX_DELIVERIES", "a whole number of deliveries (0 to 65535; 0 = no limit)"},
      {"DEDUP_WINDOW", "a whole number of seconds (1 to 2592000)"},
      {"GROUP_CONCURRENCY", "a whole number of rows (0 to 1000000; 0 = no limit)"},
      {"GROUP_BURST", "a whole number of hand-outs (1 to 1000000000)"},
      {"MAX_IN_FLIGHT", "a whole number of rows (0 to 1000000000; 0 = no limit)"},
      {"MAX_BURST", "a whole number of hand-outs (1 to 1000000000)"},
      {"HISTORY_RETENTION", "a whole number of seconds (0 to 31536000; 0 = keep no history)"},
  };
  for (const engine_option_value* o = share->option_list; o; o = o->next) {
    if (!o->value.str) continue;
    for (const NumberOption& n : numbers) {
      if (my_strcasecmp(system_charset_info, o->name.str, n.name) != 0) continue;
      const std::string text(o->value.str, o->value.length);
      if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
        *error = std::string(n.name) + ": '" + text + "' is not " + n.expected;
        return false;
      }
    }
  }
  return true;
}

void drop_bursts_of_removed_rates(const TABLE_SHARE* share, HA_CREATE_INFO* info) {
  // info->option_list is the old definition's options followed by the ALTER's: an option the
  // ALTER sets or resets is there with a null value, and again after with its new one.
  auto value_in = [](const engine_option_value* list, const char* name) -> const char* {
    const char* value = nullptr;
    for (const engine_option_value* o = list; o; o = o->next)
      if (o->value.str && my_strcasecmp(system_charset_info, o->name.str, name) == 0) value = o->value.str;
    return value;
  };
  static const std::pair<const char*, const char*> rates[] = {{"GROUP_RATE", "GROUP_BURST"},
                                                              {"MAX_RATE", "MAX_BURST"}};
  for (const auto& [rate, burst] : rates) {
    if (!option_given(share, rate) || value_in(info->option_list, rate)) continue;  // not removed now
    const char* old_burst = value_in(share->option_list, burst);
    for (engine_option_value* o = info->option_list; o; o = o->next)
      if (o->value.str && o->value.str == old_burst && my_strcasecmp(system_charset_info, o->name.str, burst) == 0) {
        o->value.str = nullptr;  // as the server removes an option set to DEFAULT
        o->value.length = 0;
        o->parsed = true;
      }
  }
}

std::shared_ptr<const q4m::TableOptions> options_of(const TABLE_SHARE* share) {
  auto o = std::make_shared<q4m::TableOptions>();
  std::string error;  // a wrong column leaves it null (create() refused it)
  visible_at_column_of(share, nullptr, &o->visible_at, &error);
  message_group_column_of(share, nullptr, &o->message_group, &error);
  dedup_column_of(share, nullptr, &o->dedup, &error);
  if (share->option_struct) {
    o->message_ttl = std::chrono::seconds(share->option_struct->message_ttl);
    o->history_retention = std::chrono::seconds(share->option_struct->history_retention);
    o->max_deliveries = static_cast<uint32_t>(share->option_struct->max_deliveries);
    o->dedup_window = std::chrono::seconds(share->option_struct->dedup_window);
    const ha_table_option_struct& opt = *share->option_struct;
    if (o->message_group) {  // (without the column check_options() refused them)
      o->group_concurrency = static_cast<uint32_t>(opt.group_concurrency);
      rate_of("GROUP_RATE", opt.group_rate, &o->group_rate, &error);
      o->group_burst = static_cast<uint32_t>(opt.group_burst);
    }
    o->max_in_flight = opt.max_in_flight;
    rate_of("MAX_RATE", opt.max_rate, &o->max_rate, &error);
    o->max_burst = static_cast<uint32_t>(opt.max_burst);
  }
  o->max_rows = share->max_rows;
  return o;
}

int row_id_column_of(const TABLE_SHARE* share) {
  int i = -1;
  std::string error;
  return row_id_column_of(share, nullptr, &i, &error) ? i : -1;
}

bool options_change_in_place(const ha_table_option_struct* from, const ha_table_option_struct* to) {
  auto visible_at = [](const ha_table_option_struct* o) {
    return std::string(o && o->visible_at_column ? o->visible_at_column : "");
  };
  auto group = [](const ha_table_option_struct* o) {
    return std::string(o && o->message_group_column ? o->message_group_column : "");
  };
  auto dedup = [](const ha_table_option_struct* o) {
    return std::string(o && o->dedup_column ? o->dedup_column : "");
  };
  auto row_id = [](const ha_table_option_struct* o) {
    return std::string(o && o->row_id_column ? o->row_id_column : "");
  };
  return my_strcasecmp(system_charset_info, row_id(from).c_str(), row_id(to).c_str()) == 0 &&
         my_strcasecmp(system_charset_info, visible_at(from).c_str(), visible_at(to).c_str()) == 0 &&
         my_strcasecmp(system_charset_info, group(from).c_str(), group(to).c_str()) == 0 &&
         my_strcasecmp(system_charset_info, dedup(from).c_str(), dedup(to).c_str()) == 0;
}

}  // namespace q4m_engine
