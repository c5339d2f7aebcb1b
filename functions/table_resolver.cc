#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_base.h>
#include <sql_parse.h>
#include <table_cache.h>
#include <mdl.h>

#include "functions/table_resolver.h"

#include "core/table/registry.h"
#include "core/table/subscriptions.h"
#include "engine/ha_queue.h"
#include "engine/handlerton.h"
#include "engine/schema.h"
#include "engine/sql_errors.h"
#include "engine/table_definition.h"
#include "engine/xa.h"
#include "functions/condition_cache.h"
#include "functions/read_only_guard.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

// What the table definition says about a queue table, kept so that the share and the
// metadata lock can be released before a (long) wait: DROP/ALTER must not wait for us.
struct Definition {
  std::shared_ptr<const q4m_engine::TableDefinition> table;
  std::shared_ptr<const q4m::RowFilter> filter;
  std::shared_ptr<q4m::QueueTable> subscription;  // 'table@name'
};

struct Names {
  std::string db, table, condition;
  bool has_condition = false;
  std::string subscription;  // 'table@subscription' (core/table/subscriptions.h)
  bool has_subscription = false;
};

void raise(const TableArgument& a, unsigned err, const std::string& what) {
  my_printf_error(err, "%s(): argument %u: %s", MYF(0), a.function, a.position, what.c_str());
}

std::string label(const Names& n) { return n.db + "." + n.table; }
// What a subscription's consumers see named (queue_stats, messages): "db.table@name".
std::string full_label(const Names& n) { return n.has_subscription ? label(n) + "@" + n.subscription : label(n); }

// One name of a table argument from `pos`: `quoted` (`` in it is one backquote), which may
// hold any character, or plain up to one of `stops`. False on a quote left open.
bool take_name(std::string_view text, size_t* pos, const char* stops, std::string* out) {
  if (*pos < text.size() && text[*pos] == '`') {
    for (size_t i = *pos + 1; i < text.size(); ++i) {
      if (text[i] != '`') {
        *out += text[i];
      } else if (i + 1 < text.size() && text[i + 1] == '`') {
        *out += '`';
        ++i;
      } else {
        *pos = i + 1;
        return true;
      }
    }
    return false;
  }
  size_t end = text.find_first_of(stops, *pos);
  if (end == std::string_view::npos) end = text.size();
  out->assign(text.substr(*pos, end - *pos));
  *pos = end;
  return true;
}

// "[db.]table[:condition]", where db and table may each be `quoted` (then any name, with a
// ':' or a '.' in it, can be given). Unquoted, the database ends at the first '.' and the
// table at the first ':'.
bool split(THD* thd, const TableArgument& a, Names* n) {
  std::string_view text = a.text;
  auto not_a_name = [&](const char* why) {
    raise(a, ER_WRONG_ARGUMENTS, "'" + std::string(text) + "' is not a table name" + why);
    return false;
  };
  size_t pos = 0;
  std::string first, second;
  if (!take_name(text, &pos, ".:@", &first)) return not_a_name(" (a ` is left open)");
  bool has_db = pos < text.size() && text[pos] == '.';
  if (has_db) {
    ++pos;
    if (!take_name(text, &pos, ":@", &second)) return not_a_name(" (a ` is left open)");
  }
  if (pos < text.size() && text[pos] == '@') {  // a subscription: 'table@name'
    ++pos;
    if (!take_name(text, &pos, ":", &n->subscription)) return not_a_name(" (a ` is left open)");
    if (n->subscription.empty()) return not_a_name(" (no subscription name after '@')");
    n->has_subscription = true;
  }
  if (pos < text.size() && text[pos] != ':') return not_a_name(" (unexpected text after a name)");
  if (pos < text.size()) {
    if (!a.allow_condition) {
      raise(a, ER_WRONG_ARGUMENTS,
            "'" + std::string(text) + "': a condition is only allowed in queue_wait()");
      return false;
    }
    n->condition = std::string(text.substr(pos + 1));
    n->has_condition = true;
  }
  if (has_db) {
    n->db = std::move(first);
    n->table = std::move(second);
  } else {
    if (!thd->db.str) {
      raise(a, ER_NO_DB_ERROR,
            "no database selected for table '" + first + "' (use 'db.table')");
      return false;
    }
    n->db.assign(thd->db.str, thd->db.length);
    n->table = std::move(first);
  }
  if (n->table.empty() || n->db.empty()) return not_a_name("");
  return true;
}

// The names as the metadata lock and the table cache key them.
std::string cache_name(const std::string& s) {
  std::string out = s;
  if (lower_case_table_names && !out.empty()) {
    out.resize(my_casedn_str(files_charset_info, out.data()));
  }
  return out;
}

// check_table_access() (true: denied), its error told as this function's argument.
bool denied_table_access(THD* thd, const TableArgument& a, TABLE_LIST* tl) {
  if (!check_table_access(thd, a.privileges, tl, false, 1, false)) return false;
  Diagnostics_area* da = thd->get_stmt_da();
  if (!da->is_error()) return true;
  const unsigned err = da->sql_errno();
  const std::string message = da->message();
  thd->clear_error();
  raise(a, err, message);
  return true;
}

// SELECT on every column the condition names, as a WHERE needs. `tl` went through
// check_table_access(): its grant says whether SELECT is granted on the table (or higher)
// or only on some columns. Null for a temporary table (its creator may do anything).
bool check_column_privileges(THD* thd, const TableArgument& a, const Names& n, TABLE_LIST* tl,
                             const std::vector<std::string>& columns) {
  if (!tl || !(tl->grant.want_privilege & SELECT_ACL)) return true;
  for (const std::string& column : columns) {
    if (get_column_grant(thd, &tl->grant, tl->db.str, tl->table_name.str, column.c_str()) & SELECT_ACL) continue;
    const Security_context* sctx = thd->security_ctx;
    raise(a, ER_COLUMNACCESS_DENIED_ERROR,
          std::string("SELECT command denied to user '") + sctx->priv_user + "'@'" + sctx->host_or_ip +
              "' for column '" + column + "' in table '" + label(n) + "' (the condition reads it)");
    return false;
  }
  return true;
}

bool is_queue_share(const TABLE_SHARE* share) {
  return !share->is_view && share->db_type() == q4m_engine::queue_hton;
}

// Compiles `condition` against the table's columns (the condition cache), checking SELECT on
// the columns it reads.
bool compile_condition(THD* thd, const TableArgument& a, const Names& n, TABLE_SHARE* share, TABLE_LIST* tl,
                       const std::string& path, const std::string& definition_version, const std::string& condition,
                       std::shared_ptr<const q4m::RowFilter>* filter) {
  std::string version = definition_version;
  version += '\0';
  if (a.text_charset) version += a.text_charset->cs_name.str;
  std::vector<std::string> columns;
  q4m::Status st = ConditionCache::instance().get(
      path, version, condition,
      [&] {
        q4m::TableSchema schema = q4m_engine::schema_of(share);
        schema.table_name = label(n);
        q4m_engine::convert_literals_from(a.text_charset, share, &schema);
        return schema;
      },
      filter, &columns);
  if (!check_column_privileges(thd, a, n, tl, columns)) return false;
  if (!st.ok()) {
    raise(a, ER_WRONG_ARGUMENTS, st.message());
    return false;
  }
  return true;
}

// 'table@name': the subscription's own condition compiled and given to it (once per open of
// the table), and the subscription as the table to take from.
bool resolve_subscription(THD* thd, const TableArgument& a, const Names& n, TABLE_SHARE* share, TABLE_LIST* tl,
                          const std::string& path, const std::string& version,
                          std::shared_ptr<q4m::QueueTable>* table) {
  q4m::Subscriptions* subs = (*table)->subscriptions();
  bool found = false;
  const std::string condition = subs ? subs->condition_of(n.subscription, &found) : std::string();
  if (!found) {
    raise(a, ER_WRONG_ARGUMENTS, "table '" + label(n) + "' has no subscription '" + n.subscription + "'");
    return false;
  }
  if (!condition.empty()) {
    std::shared_ptr<const q4m::RowFilter> filter;
    if (!compile_condition(thd, a, n, share, tl, path, version, condition, &filter)) return false;
    subs->set_filter(n.subscription, std::move(filter));
  }
  std::shared_ptr<q4m::QueueTable> sub = subs->find(n.subscription);
  if (!sub) {
    raise(a, ER_WRONG_ARGUMENTS, "table '" + label(n) + "' has no subscription '" + n.subscription + "'");
    return false;
  }
  *table = std::move(sub);
  return true;
}

// `tl`: the table's privileges (denied_table_access), null for a temporary table.
bool check_definition(THD* thd, const TableArgument& a, const Names& n, TABLE_SHARE* share, TABLE_LIST* tl,
                      Definition* def) {
  if (!is_queue_share(share)) {
    raise(a, ER_WRONG_ARGUMENTS, "table '" + label(n) + "' is not a QUEUE table");
    return false;
  }
  def->table = q4m_engine::definition_of(share);
  if (n.has_subscription) {
    std::shared_ptr<q4m::QueueTable> table;
    q4m::Status st = q4m::TableRegistry::instance().acquire(def->table->path, &table);
    if (!st.ok()) {
      raise(a, q4m_engine::sql_errno_for(st.code()), "table '" + label(n) + "': " + st.message());
      return false;
    }
    table->configure(def->table->options);
    if (!resolve_subscription(thd, a, n, share, tl, def->table->path, def->table->version, &table)) return false;
    def->subscription = std::move(table);
  }
  if (!n.has_condition) return true;
  // The same condition text means other literals in another character set.
  std::string version = def->table->version;
  version += '\0';
  if (a.text_charset) version += a.text_charset->cs_name.str;
  std::vector<std::string> columns;
  q4m::Status st = ConditionCache::instance().get(
      def->table->path, version, n.condition,
      [&] {
        q4m::TableSchema schema = q4m_engine::schema_of(share);
        schema.table_name = label(n);
        q4m_engine::convert_literals_from(a.text_charset, share, &schema);
        return schema;
      },
      &def->filter, &columns);
  // Before a compile error too: its text could tell an unreadable column's type.
  if (!check_column_privileges(thd, a, n, tl, columns)) return false;
  if (!st.ok()) {
    raise(a, ER_WRONG_ARGUMENTS, st.message());
    return false;
  }
  return true;
}

// With `keep`, a successful read hands its metadata lock over instead of releasing it.
bool read_definition(THD* thd, const TableArgument& a, const Names& n, Definition* def,
                     HeldMetadataLock* keep) {
  std::string db = cache_name(n.db), table = cache_name(n.table);
  if (db.size() > NAME_LEN || table.size() > NAME_LEN) {
    raise(a, ER_NO_SUCH_TABLE, "table '" + label(n) + "' does not exist");
    return false;
  }
  // Temporary tables shadow base tables of the same name, as in any statement.
  if (TABLE_SHARE* tmp = thd->find_tmp_table_share(db.c_str(), table.c_str()))
    return check_definition(thd, a, n, tmp, nullptr, def);

  LEX_CSTRING db_name = {db.c_str(), db.size()};
  LEX_CSTRING table_name = {table.c_str(), table.size()};
  TABLE_LIST tl;
  tl.init_one_table(&db_name, &table_name, nullptr, TL_READ);
  if (denied_table_access(thd, a, &tl)) return false;

  MDL_request mdl;
  MDL_REQUEST_INIT(&mdl, MDL_key::TABLE, db.c_str(), table.c_str(), MDL_SHARED_HIGH_PRIO,
                   MDL_EXPLICIT);
  if (thd->mdl_context.acquire_lock(&mdl, thd->variables.lock_wait_timeout)) return false;
  bool ok = false;
  TABLE_SHARE* share = tdc_acquire_share(thd, &tl, GTS_TABLE | GTS_VIEW);
  if (share) {
    ok = check_definition(thd, a, n, share, &tl, def);
    tdc_release_share(share);
  } else {
    uint err = thd->get_stmt_da()->is_error() ? thd->get_stmt_da()->sql_errno() : 0;
    if (err == ER_NO_SUCH_TABLE || err == ER_BAD_DB_ERROR || err == ER_NO_SUCH_TABLE_IN_ENGINE ||
        err == 0) {
      thd->clear_error();
      raise(a, ER_NO_SUCH_TABLE, "table '" + label(n) + "' does not exist");
    }
  }
  if (ok && keep)
    keep->hold(thd, mdl.ticket);
  else
    thd->mdl_context.release_lock(mdl.ticket);
  return ok;
}

// The statement's own open instance of db.table (`SELECT * FROM q WHERE queue_wait('q')`).
// Its metadata lock already pins the definition for the whole statement, so the table
// needs no second lock, definition-cache or registry lookup: the per-message path.
TABLE* statement_table(THD* thd, const std::string& db, const std::string& table) {
  const size_t key_length = db.size() + 1 + table.size() + 1;  // "db\0table\0"
  for (TABLE* t = thd->open_tables; t; t = t->next) {
    const TABLE_SHARE* s = t->s;
    if (s->table_cache_key.length == key_length &&
        memcmp(s->table_cache_key.str, db.c_str(), db.size() + 1) == 0 &&
        memcmp(s->table_cache_key.str + db.size() + 1, table.c_str(), table.size() + 1) == 0)
      return t;
  }
  return nullptr;
}

bool resolve_statement_table(THD* thd, const TableArgument& a, const Names& n, TABLE* t,
                             ResolvedTable* out) {
  if (!is_queue_share(t->s)) {
    raise(a, ER_WRONG_ARGUMENTS, "table '" + label(n) + "' is not a QUEUE table");
    return false;
  }
  TABLE_LIST tl;
  tl.init_one_table(&t->s->db, &t->s->table_name, nullptr, TL_READ);
  if (denied_table_access(thd, a, &tl)) return false;
  Definition def;
  if ((n.has_condition || n.has_subscription) && !check_definition(thd, a, n, t->s, &tl, &def)) return false;
  out->names_subscription = def.subscription != nullptr;
  out->subscription.table = def.subscription ? def.subscription : q4m_engine::queue_of(t->file);
  out->subscription.filter = std::move(def.filter);
  out->label = full_label(n);
  return true;
}

bool resolve_names(THD* thd, const TableArgument& a, const Names& n, ResolvedTable* out) {
  q4m_engine::end_recovered_commits();
  // DELETE is what a function needs that takes or removes rows.
  if ((a.privileges & DELETE_ACL) && refused_on_read_only(thd, a.function, label(n))) return false;
  out->db = cache_name(n.db);
  out->table = cache_name(n.table);
  {
    std::string db = cache_name(n.db), name = cache_name(n.table);
    // A temporary table of that name shadows the base table: the full path handles it.
    if (!thd->has_temporary_tables() || !thd->find_tmp_table_share(db.c_str(), name.c_str())) {
      if (TABLE* t = statement_table(thd, db, name)) return resolve_statement_table(thd, a, n, t, out);
    }
  }
  Definition def;
  if (!read_definition(thd, a, n, &def, a.hold_metadata_lock ? &out->metadata_lock : nullptr)) return false;
  std::shared_ptr<q4m::QueueTable> table;
  q4m::Status st = q4m::TableRegistry::instance().acquire(def.table->path, &table);
  if (!st.ok()) {
    raise(a, q4m_engine::sql_errno_for(st.code()), "table '" + label(n) + "': " + st.message());
    return false;
  }
  // The table may not have been opened by a statement since the server started.
  table->configure(def.table->options);
  out->label = full_label(n);
  out->names_subscription = def.subscription != nullptr;
  out->subscription.table = def.subscription ? std::move(def.subscription) : std::move(table);
  out->subscription.filter = std::move(def.filter);
  return true;
}

}  // namespace

void HeldMetadataLock::hold(THD* thd, MDL_ticket* ticket) {
  release();
  thd_ = thd;
  ticket_ = ticket;
}

void HeldMetadataLock::release() {
  if (ticket_) thd_->mdl_context.release_lock(ticket_);
  ticket_ = nullptr;
}

bool resolve_table(THD* thd, const TableArgument& a, ResolvedTable* out) {
  Names n;
  return split(thd, a, &n) && resolve_names(thd, a, n, out);
}

bool resolve_table_names(THD* thd, const TableArgument& a, const std::string& db, const std::string& table,
                         ResolvedTable* out) {
  Names n;
  n.db = db;
  n.table = table;
  return resolve_names(thd, a, n, out);
}

bool resolve_table_argument(THD* thd, Item* arg, const char* function, privilege_t privileges, ResolvedTable* out,
                            bool hold_metadata_lock) {
  std::string text;
  if (!parse_string(arg, function, 1, "table name", &text)) return false;
  TableArgument a{function, 1, text, false, privileges, hold_metadata_lock};
  return resolve_table(thd, a, out);
}

}  // namespace q4m_functions
