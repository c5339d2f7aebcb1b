#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_i_s.h>
#include <sql_parse.h>
#include <sql_table.h>
#include <table_cache.h>
#include <mysql/plugin.h>

#include <string>
#include <vector>

#include "core/row/payload.h"
#include "core/table/registry.h"
#include "core/table/subscriptions.h"
#include "engine/info_schema.h"
#include "engine/handlerton.h"
#include "engine/data_files.h"
#include "engine/table_definition.h"

bool schema_table_store_record(THD* thd, TABLE* table);

namespace q4m_engine {

namespace {

// TABLE_SCHEMA, TABLE_NAME, then the figures of core/policy/table_stats.h that name a column.
constexpr int kSchema = 0;

ST_FIELD_INFO* queue_tables_fields() {
  static std::vector<ST_FIELD_INFO> fields = [] {
    std::vector<ST_FIELD_INFO> f{Show::Column("TABLE_SCHEMA", Show::Name(), NOT_NULL),
                                 Show::Column("TABLE_NAME", Show::Name(), NOT_NULL)};
    for (const q4m::Figure& figure : q4m::kTableFigures)
      if (figure.column) f.push_back(Show::Column(figure.column, Show::ULonglong(), NOT_NULL));
    f.push_back(Show::CEnd());
    return f;
  }();
  return fields.data();
}

bool may_see(THD* thd, const std::string& db, const std::string& name) {
  LEX_CSTRING db_name = {db.c_str(), db.size()};
  LEX_CSTRING table_name = {name.c_str(), name.size()};
  TABLE_LIST tl;
  tl.init_one_table(&db_name, &table_name, nullptr, TL_READ);
  return !check_table_access(thd, SELECT_ACL, &tl, true, 1, true);
}

// A table no statement has opened since the server started has not been given its options
// yet (MAX_DELIVERIES, MESSAGE_TTL, VISIBLE_AT_COLUMN, MESSAGE_GROUP_COLUMN, DEDUP_COLUMN), so its counts
// (DEAD_ROWS, MESSAGE_GROUPS) would be off: give them now. Skipped while DDL holds the table
// (the DDL applies them).
void apply_current_options(THD* thd, const std::string& db, const std::string& name, q4m::QueueTable& queue) {
  MDL_request mdl;
  MDL_REQUEST_INIT(&mdl, MDL_key::TABLE, db.c_str(), name.c_str(), MDL_SHARED_HIGH_PRIO, MDL_EXPLICIT);
  if (thd->mdl_context.try_acquire_lock(&mdl) || !mdl.ticket) return;
  LEX_CSTRING db_name = {db.c_str(), db.size()};
  LEX_CSTRING table_name = {name.c_str(), name.size()};
  TABLE_LIST tl;
  tl.init_one_table(&db_name, &table_name, nullptr, TL_READ);
  if (TABLE_SHARE* share = tdc_acquire_share(thd, &tl, GTS_TABLE)) {
    if (share->db_type() == queue_hton) queue.configure(definition_of(share)->options);
    tdc_release_share(share);
  } else {
    thd->clear_error();  // dropped meanwhile: listed as it was
  }
  thd->mdl_context.release_lock(mdl.ticket);
}

// Calls fn(db, name, table) for each QUEUE table in the data directory that the user may
// SELECT from. Data files live at ./<db>/<table>.Q4M relative to the datadir (the server's
// cwd), the same paths the handler gives the registry. Returns fn's first nonzero result.
template <typename Fn>
int for_each_queue_table(THD* thd, Fn fn) {
  int rc = 0;
  for_each_data_file([&](const std::string& db, const std::string& name, const std::string& path) {
    if (!may_see(thd, db, name)) return true;
    std::shared_ptr<q4m::QueueTable> queue;
    q4m::Status st = q4m::TableRegistry::instance().acquire(path, &queue);
    if (!st.ok()) {  // listed tables stay readable; the broken one is named in a warning
      push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_UNKNOWN_ERROR, "QUEUE table '%s.%s' skipped: %s",
                          db.c_str(), name.c_str(), st.message().c_str());
      return true;
    }
    apply_current_options(thd, db, name, *queue);
    rc = fn(db, name, *queue);
    return rc == 0;
  });
  return rc;
}

void store_name(TABLE* t, int schema_field, const std::string& db, const std::string& name) {
  t->field[schema_field]->store(db.c_str(), db.size(), system_charset_info);
  t->field[schema_field + 1]->store(name.c_str(), name.size(), system_charset_info);
}

int fill_queue_tables(THD* thd, TABLE_LIST* tables, Item*) {
  TABLE* t = tables->table;
  return for_each_queue_table(thd, [&](const std::string& db, const std::string& name, q4m::QueueTable& queue) {
    const q4m::TableStats info = queue.info();
    store_name(t, kSchema, db, name);
    int column = kSchema + 2;
    for (const q4m::Figure& figure : q4m::kTableFigures)
      if (figure.column) t->field[column++]->store(static_cast<longlong>(info.*figure.field), true);
    return schema_table_store_record(thd, t) ? 1 : 0;
  });
}

enum OwnedColumn { kOwnedSchema, kOwnedName, kRowId, kConnectionId, kDeliveryCount, kOwnedMs, kRowAgeMs,
                   kLeaseLeftMs, kOwnedSubscription };

ST_FIELD_INFO queue_owned_rows_fields[] = {
    Show::Column("TABLE_SCHEMA", Show::Name(), NOT_NULL),
    Show::Column("TABLE_NAME", Show::Name(), NOT_NULL),
    Show::Column("ROW_ID", Show::ULonglong(), NOT_NULL),
    Show::Column("CONNECTION_ID", Show::ULonglong(), NOT_NULL),
    Show::Column("DELIVERY_COUNT", Show::ULonglong(), NOT_NULL),
    Show::Column("OWNED_MS", Show::ULonglong(), NOT_NULL),
    Show::Column("ROW_AGE_MS", Show::ULonglong(), NOT_NULL),
    Show::Column("LEASE_LEFT_MS", Show::ULonglong(), NULLABLE),
    Show::Column("SUBSCRIPTION_NAME", Show::Varchar(64), NULLABLE),  // NULL: a plain row's owner
    Show::CEnd()};

int fill_queue_owned_rows(THD* thd, TABLE_LIST* tables, Item*) {
  TABLE* t = tables->table;
  return for_each_queue_table(thd, [&](const std::string& db, const std::string& name, q4m::QueueTable& queue) {
    // The table's own owned rows, then each subscription's (a row may be owned once per subscription).
    std::vector<std::pair<std::string, std::vector<q4m::OwnedRowInfo>>> lists;
    lists.emplace_back(std::string(), queue.owned_rows());
    if (q4m::Subscriptions* subs = queue.subscriptions(); subs && subs->any())
      for (const q4m::SubscriptionInfo& i : subs->list())
        if (i.owned_rows)
          if (std::shared_ptr<q4m::QueueTable> sub = subs->find(i.name)) lists.emplace_back(i.name, sub->owned_rows());
    for (const auto& [subscription, rows] : lists) {
      for (const q4m::OwnedRowInfo& r : rows) {
        store_name(t, kOwnedSchema, db, name);
        if (subscription.empty()) {
          t->field[kOwnedSubscription]->set_null();
        } else {
          t->field[kOwnedSubscription]->set_notnull();
          t->field[kOwnedSubscription]->store(subscription.c_str(), subscription.size(), system_charset_info);
        }
        t->field[kRowId]->store(r.id, true);
        t->field[kConnectionId]->store(r.connection_id, true);
        t->field[kDeliveryCount]->store(r.deliveries, true);
        t->field[kOwnedMs]->store(r.owned_ms, true);
        t->field[kRowAgeMs]->store(r.row_age_ms, true);
        if (r.lease_left_ms < 0) {
          t->field[kLeaseLeftMs]->set_null();
        } else {
          t->field[kLeaseLeftMs]->set_notnull();
          t->field[kLeaseLeftMs]->store(r.lease_left_ms, true);
        }
        if (schema_table_store_record(thd, t)) return 1;
      }
    }
    return 0;
  });
}

enum HeldGroupColumn { kHeldSchema, kHeldName, kGroupKey, kOutRows, kReadyRows, kHeldRows, kWaitingFor,
                       kNextTokenMs };

ST_FIELD_INFO queue_held_groups_fields[] = {
    Show::Column("TABLE_SCHEMA", Show::Name(), NOT_NULL),
    Show::Column("TABLE_NAME", Show::Name(), NOT_NULL),
    Show::Column("GROUP_KEY", Show::Varchar(512), NULLABLE),
    Show::Column("OUT_ROWS", Show::ULonglong(), NOT_NULL),
    Show::Column("READY_ROWS", Show::ULonglong(), NOT_NULL),
    Show::Column("HELD_ROWS", Show::ULonglong(), NOT_NULL),
    Show::Column("WAITING_FOR", Show::Varchar(32), NOT_NULL),
    Show::Column("NEXT_TOKEN_MS", Show::ULonglong(), NULLABLE),
    Show::CEnd()};

// Groups listed per table at most: the list is for finding the keys that are held back, and
// is made under the table's lock.
constexpr size_t kMaxHeldGroups = 1000;

// Stores the group key of the row with `payload` in `f` (MESSAGE_GROUP_COLUMN `k`): integers
// and strings as their value, other types as the hex of their stored bytes. NULL if the row
// does not decode (it was removed and its bytes reused).
void store_group_key(Field* f, const q4m::KeyColumn& k, std::string_view payload) {
  std::vector<q4m::RowPayloadView::Column> columns;
  if (k.column >= k.schema.columns.size() || !q4m::RowPayloadView::decode(k.schema, payload, &columns) ||
      columns[k.column].is_null) {
    f->set_null();
    return;
  }
  f->set_notnull();
  const q4m::ColumnInfo& c = k.schema.columns[k.column];
  const std::string_view v = columns[k.column].bytes;
  if (c.kind == q4m::ColumnKind::kInt && v.size() >= 1 && v.size() <= 8) {
    uint64_t u = 0;
    for (size_t i = v.size(); i-- > 0;) u = (u << 8) | static_cast<unsigned char>(v[i]);
    if (!c.is_unsigned && v.size() < 8 && (u >> (8 * v.size() - 1)) & 1) u |= ~uint64_t(0) << (8 * v.size());
    f->store(static_cast<longlong>(u), c.is_unsigned);
    return;
  }
  const CHARSET_INFO* cs = c.collation.empty() ? nullptr : get_charset_by_name(c.collation.c_str(), MYF(0));
  if (cs && (c.kind == q4m::ColumnKind::kChar || c.kind == q4m::ColumnKind::kVarchar)) {
    const size_t length = c.kind == q4m::ColumnKind::kChar ? cs->lengthsp(v.data(), v.size()) : v.size();
    f->store(v.data(), length, cs);
    return;
  }
  static const char kHex[] = "0123456789ABCDEF";
  std::string hex = "0x";
  for (unsigned char ch : v) {
    hex += kHex[ch >> 4];
    hex += kHex[ch & 15];
  }
  f->store(hex.data(), hex.size(), system_charset_info);
}

int fill_queue_held_groups(THD* thd, TABLE_LIST* tables, Item*) {
  TABLE* t = tables->table;
  return for_each_queue_table(thd, [&](const std::string& db, const std::string& name, q4m::QueueTable& queue) {
    const std::shared_ptr<const q4m::TableOptions> options = queue.options();
    if (!options->message_group) return 0;
    std::string payload;
    for (const q4m::HeldGroupInfo& g : queue.held_groups(kMaxHeldGroups)) {
      store_name(t, kHeldSchema, db, name);
      bool found = false;
      if (queue.read_row(g.row, &payload, &found).ok() && found)
        store_group_key(t->field[kGroupKey], *options->message_group, payload);
      else
        t->field[kGroupKey]->set_null();  // its rows are gone meanwhile
      t->field[kOutRows]->store(g.out, true);
      t->field[kReadyRows]->store(g.ready, true);
      t->field[kHeldRows]->store(g.held, true);
      const char* waiting_for = g.by_rate ? "GROUP_RATE" : "GROUP_CONCURRENCY";
      t->field[kWaitingFor]->store(waiting_for, strlen(waiting_for), system_charset_info);
      if (g.next_token_ms < 0) {
        t->field[kNextTokenMs]->set_null();
      } else {
        t->field[kNextTokenMs]->set_notnull();
        t->field[kNextTokenMs]->store(g.next_token_ms, true);
      }
      if (schema_table_store_record(thd, t)) return 1;
    }
    return 0;
  });
}

enum SubscriptionColumn { kSubSchema, kSubName, kSubscription, kSubCondition, kSubStart, kPendingRows,
                          kOldestAgeMs, kSubOwnedRows, kSubDelayedRows, kSubDeadRows, kRowsDelivered, kRowsEnded,
                          kSubWaiters };

ST_FIELD_INFO queue_subscriptions_fields[] = {
    Show::Column("TABLE_SCHEMA", Show::Name(), NOT_NULL),
    Show::Column("TABLE_NAME", Show::Name(), NOT_NULL),
    Show::Column("SUBSCRIPTION_NAME", Show::Varchar(64), NOT_NULL),
    Show::Column("CONDITION_TEXT", Show::Varchar(4096), NOT_NULL),
    Show::Column("START_ROWID", Show::ULonglong(), NOT_NULL),
    Show::Column("PENDING_ROWS", Show::ULonglong(), NOT_NULL),
    Show::Column("OLDEST_AGE_MS", Show::ULonglong(), NOT_NULL),
    Show::Column("OWNED_ROWS", Show::ULonglong(), NOT_NULL),
    Show::Column("DELAYED_ROWS", Show::ULonglong(), NOT_NULL),
    Show::Column("DEAD_ROWS", Show::ULonglong(), NOT_NULL),
    Show::Column("ROWS_DELIVERED", Show::ULonglong(), NOT_NULL),
    Show::Column("ROWS_ENDED", Show::ULonglong(), NOT_NULL),
    Show::Column("WAITERS", Show::ULonglong(), NOT_NULL),
    Show::CEnd()};

int fill_queue_subscriptions(THD* thd, TABLE_LIST* tables, Item*) {
  TABLE* t = tables->table;
  return for_each_queue_table(thd, [&](const std::string& db, const std::string& name, q4m::QueueTable& queue) {
    q4m::Subscriptions* subs = queue.subscriptions();
    if (!subs) return 0;
    for (const q4m::SubscriptionInfo& s : subs->list()) {
      store_name(t, kSubSchema, db, name);
      t->field[kSubscription]->store(s.name.data(), s.name.size(), system_charset_info);
      t->field[kSubCondition]->store(s.condition.data(), s.condition.size(), system_charset_info);
      t->field[kSubStart]->store(s.start, true);
      t->field[kPendingRows]->store(s.pending_rows, true);
      t->field[kOldestAgeMs]->store(s.oldest_age_ms, true);
      t->field[kSubOwnedRows]->store(s.owned_rows, true);
      t->field[kSubDelayedRows]->store(s.delayed_rows, true);
      t->field[kSubDeadRows]->store(s.dead_rows, true);
      t->field[kRowsDelivered]->store(s.rows_delivered, true);
      t->field[kRowsEnded]->store(s.rows_ended, true);
      t->field[kSubWaiters]->store(s.waiters, true);
      if (schema_table_store_record(thd, t)) return 1;
    }
    return 0;
  });
}

}  // namespace

st_mysql_information_schema queue_subscriptions_descriptor = {MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};

int queue_subscriptions_init(void* p) {
  ST_SCHEMA_TABLE* schema = static_cast<ST_SCHEMA_TABLE*>(p);
  schema->fields_info = queue_subscriptions_fields;
  schema->fill_table = fill_queue_subscriptions;
  return 0;
}

st_mysql_information_schema queue_tables_descriptor = {MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};
st_mysql_information_schema queue_owned_rows_descriptor = {MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};
st_mysql_information_schema queue_held_groups_descriptor = {MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};

int queue_tables_init(void* p) {
  ST_SCHEMA_TABLE* schema = static_cast<ST_SCHEMA_TABLE*>(p);
  schema->fields_info = queue_tables_fields();
  schema->fill_table = fill_queue_tables;
  return 0;
}

int queue_owned_rows_init(void* p) {
  ST_SCHEMA_TABLE* schema = static_cast<ST_SCHEMA_TABLE*>(p);
  schema->fields_info = queue_owned_rows_fields;
  schema->fill_table = fill_queue_owned_rows;
  return 0;
}

int queue_held_groups_init(void* p) {
  ST_SCHEMA_TABLE* schema = static_cast<ST_SCHEMA_TABLE*>(p);
  schema->fields_info = queue_held_groups_fields;
  schema->fill_table = fill_queue_held_groups;
  return 0;
}

}  // namespace q4m_engine
