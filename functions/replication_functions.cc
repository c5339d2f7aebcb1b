// queue_apply_removal(db, table, rows) and queue_apply_dedup(db, table, positions): what a
// replica runs for what the primary's binary log recorded (engine/binlog_statements.h writes
// the statements).
//  - queue_apply_removal removes exactly the rows named, by id, checking each one's length
//    and checksum; a row that is not there (or differs) fails the statement, which stops the
//    replica's applier: a replica whose queue is not the primary's says so instead of
//    removing other rows.
//  - queue_apply_dedup drops the transaction's new rows the primary dropped as duplicates
//    (DEDUP_COLUMN) or relayed replays, by their position among the rows it inserted into
//    the table.
//  - queue_apply_srcid records a relay source's last row id as the primary did with the
//    relayed rows (queue_set_srcid), so that a replica taking over drops the same replays.
// In the applier's transaction (or the statement's, or at once) and logged again with the
// same text for this server's replicas.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <string>
#include <vector>

#include "engine/binlog_redo.h"
#include "engine/binlog_statements.h"
#include "engine/connection_state.h"
#include "engine/sql_errors.h"
#include "engine/transactions.h"
#include "functions/function_builders.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"
#include "functions/table_resolver.h"
#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

// The part both share: the arguments, the table, the transaction to apply in.
class Item_queue_apply : public Item_queue_action {
 public:
  Item_queue_apply(THD* thd, List<Item>& args, const char* name, const char* what)
      : Item_queue_action(thd, args), name_(name), what_(what) {}
  LEX_CSTRING func_name_cstring() const override { return {name_, strlen(name_)}; }
  bool fix_length_and_dec(THD*) override {
    max_length = 10;
    return false;
  }

 protected:
  // Parses `list` (argument 3); false with *error if it is not what the function takes.
  virtual bool parse(const std::string& list, std::string* error) = 0;
  // Applies it in `txn`; the number of rows it names.
  virtual q4m::Status apply(q4m::Transaction& txn, const std::shared_ptr<q4m::QueueTable>& table) = 0;
  virtual longlong count() const = 0;

  longlong run(THD* thd) override {
    std::string db, name, list, error;
    if (!parse_string(args[0], name_, 1, "the database", &db) || !parse_string(args[1], name_, 2, "the table", &name) ||
        !parse_string(args[2], name_, 3, what_, &list))
      return 0;
    if (!parse(list, &error)) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument 3: %s", MYF(0), name_, error.c_str());
      return 0;
    }
    ResolvedTable t;
    TableArgument a{name_, 2, name, false, DELETE_ACL};
    if (!resolve_table_names(thd, a, db, name, &t)) return 0;
    if (!q4m_engine::lock_until_transaction_end(thd, t.db, t.table)) return 0;
    q4m::Status st;
    if (!q4m_engine::change_in_transaction(
            thd, [&](q4m::Transaction& txn) { return apply(txn, t.subscription.table); }, &st))
      return 0;
    if (!st.ok()) {
      my_printf_error(q4m_engine::sql_errno_for(st.code()),
                      "%s(): table '%s': %s (this server's queue is not the one whose binary log named the "
                      "row: it was not a copy from the start, or diverged)",
                      MYF(0), name_, t.label.c_str(), st.message().c_str());
      return 0;
    }
    return count();
  }

 private:
  const char* name_;
  const char* what_;
};

// The functions whose third argument names rows ('<id>:<length>:<checksum>,...') that the
// transaction applies as `Apply` does (removes them, or replaces them by copies).
using NamedRowsAction = q4m::Status (q4m::Transaction::*)(const std::shared_ptr<q4m::QueueTable>&,
                                                          const std::vector<q4m::NamedRow>&);

template <const char* kName, NamedRowsAction Apply>
class Item_queue_apply_named_rows final : public Item_queue_apply {
 public:
  Item_queue_apply_named_rows(THD* thd, List<Item>& args) : Item_queue_apply(thd, args, kName, "the rows") {}
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_queue_apply_named_rows>(thd, this); }

 protected:
  bool parse(const std::string& list, std::string* error) override {
    return q4m_engine::parse_named_rows(list, &rows_, error);
  }
  q4m::Status apply(q4m::Transaction& txn, const std::shared_ptr<q4m::QueueTable>& table) override {
    return (txn.*Apply)(table, rows_);
  }
  longlong count() const override { return static_cast<longlong>(rows_.size()); }

 private:
  std::vector<q4m::NamedRow> rows_;
};

constexpr char kRemoval[] = "queue_apply_removal";
using Item_func_queue_apply_removal = Item_queue_apply_named_rows<kRemoval, &q4m::Transaction::remove_named>;
constexpr char kRedrive[] = "queue_apply_redrive";
using Item_func_queue_apply_redrive = Item_queue_apply_named_rows<kRedrive, &q4m::Transaction::redrive_named>;

constexpr const char* kDedup = "queue_apply_dedup";

class Item_func_queue_apply_dedup final : public Item_queue_apply {
 public:
  Item_func_queue_apply_dedup(THD* thd, List<Item>& args) : Item_queue_apply(thd, args, kDedup, "the row positions") {}
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_apply_dedup>(thd, this); }

 protected:
  bool parse(const std::string& list, std::string* error) override {
    return q4m_engine::parse_positions(list, &positions_, error);
  }
  q4m::Status apply(q4m::Transaction& txn, const std::shared_ptr<q4m::QueueTable>& table) override {
    return txn.drop_staged(table, positions_);
  }
  longlong count() const override { return static_cast<longlong>(positions_.size()); }

 private:
  std::vector<size_t> positions_;
};

constexpr const char* kSrcid = "queue_apply_srcid";

class Item_func_queue_apply_srcid final : public Item_queue_apply {
 public:
  Item_func_queue_apply_srcid(THD* thd, List<Item>& args) : Item_queue_apply(thd, args, kSrcid, "the relay source") {}
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_apply_srcid>(thd, this); }

 protected:
  bool parse(const std::string& text, std::string* error) override {
    return q4m_engine::parse_relay_source(text, &source_, &last_, error);
  }
  // With the transaction's rows (logged again at its prepare, for a chained replica).
  q4m::Status apply(q4m::Transaction& txn, const std::shared_ptr<q4m::QueueTable>& table) override {
    txn.record_relay(table, source_, last_);
    return q4m::Status::Ok();
  }
  longlong count() const override { return 1; }

 private:
  uint32_t source_ = 0;
  q4m::RowId last_ = 0;
};

constexpr const char* kRedo = "queue_apply_redo";

// A prepared part's redo (engine/binlog_redo.h): for the crash recovery of the server that
// logged it. Another server (a replica, or one reading a dump of the log) applies the
// transaction's row events and statements instead; it only checks the arguments here.
class Item_func_queue_apply_redo final : public Item_queue_action {
 public:
  Item_func_queue_apply_redo(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_apply_redo>(thd, this); }
  LEX_CSTRING func_name_cstring() const override { return {kRedo, strlen(kRedo)}; }
  bool fix_length_and_dec(THD*) override {
    max_length = 10;
    return false;
  }

 protected:
  longlong run(THD*) override {
    std::string db, name, arg, error;
    if (!parse_string(args[0], kRedo, 1, "the database", &db) || !parse_string(args[1], kRedo, 2, "the table", &name) ||
        !parse_string(args[2], kRedo, 3, "the redo", &arg))
      return 0;
    uint32_t server = 0;
    q4m::RedoPart part;
    if (!q4m_engine::parse_redo_argument(arg, &server, &part, &error)) {
      my_printf_error(ER_WRONG_ARGUMENTS, "%s(): table '%s.%s', argument 3: %s", MYF(0), kRedo, db.c_str(),
                      name.c_str(), error.c_str());
      return 0;
    }
    return 0;
  }
};

constexpr char kApplyRedoArgs[] = "queue_apply_redo() takes 3 arguments (the database, the table, the redo)";
using Create_queue_apply_redo = Create_func_args<Item_func_queue_apply_redo, kApplyRedoArgs, 3, 3>;

constexpr char kApplyRemovalArgs[] = "queue_apply_removal() takes 3 arguments (the database, the table, the rows)";
using Create_queue_apply_removal = Create_func_args<Item_func_queue_apply_removal, kApplyRemovalArgs, 3, 3>;
constexpr char kApplyRedriveArgs[] = "queue_apply_redrive() takes 3 arguments (the database, the table, the rows)";
using Create_queue_apply_redrive = Create_func_args<Item_func_queue_apply_redrive, kApplyRedriveArgs, 3, 3>;
constexpr char kApplyDedupArgs[] =
    "queue_apply_dedup() takes 3 arguments (the database, the table, the positions of the rows dropped)";
using Create_queue_apply_dedup = Create_func_args<Item_func_queue_apply_dedup, kApplyDedupArgs, 3, 3>;
constexpr char kApplySrcidArgs[] =
    "queue_apply_srcid() takes 3 arguments (the database, the table, '<source id>:<last row id>')";
using Create_queue_apply_srcid = Create_func_args<Item_func_queue_apply_srcid, kApplySrcidArgs, 3, 3>;

}  // namespace

Plugin_function queue_apply_removal_plugin(&Create_queue_apply_removal::s_singleton);
Plugin_function queue_apply_dedup_plugin(&Create_queue_apply_dedup::s_singleton);
Plugin_function queue_apply_redrive_plugin(&Create_queue_apply_redrive::s_singleton);
Plugin_function queue_apply_srcid_plugin(&Create_queue_apply_srcid::s_singleton);
Plugin_function queue_apply_redo_plugin(&Create_queue_apply_redo::s_singleton);

}  // namespace q4m_functions
