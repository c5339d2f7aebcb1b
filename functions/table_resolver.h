// Resolves a queue function's table argument "[db.]table[:condition]" to the open
// QueueTable (and compiled condition), telling apart "does not exist" and "is not a
// QUEUE table" through the server's table definition cache, and checking privileges.
#pragma once
#include <my_global.h>
#include <sql_acl.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/table/consumer.h"

class THD;
class Item;
class MDL_ticket;

namespace q4m_functions {

struct TableArgument {
  const char* function;   // "queue_wait", for messages
  unsigned position;      // 1-based argument number
  std::string_view text;  // the argument as given
  bool allow_condition;   // queue_wait only
  privilege_t privileges; // needed on the table, e.g. SELECT_ACL | DELETE_ACL
  // Keep the table's metadata lock in ResolvedTable::metadata_lock (queue_compact: DROP and
  // ALTER wait for the work, as for any statement using the table). queue_wait must not:
  // DDL would wait for a consumer's whole wait.
  bool hold_metadata_lock = false;
  // The character set `text` came in: a condition's string literals are in it.
  const CHARSET_INFO* text_charset = nullptr;
};

// A metadata lock kept past resolution; released when this goes away.
class HeldMetadataLock {
 public:
  HeldMetadataLock() = default;
  ~HeldMetadataLock() { release(); }
  HeldMetadataLock(const HeldMetadataLock&) = delete;
  HeldMetadataLock& operator=(const HeldMetadataLock&) = delete;
  void hold(THD* thd, MDL_ticket* ticket);
  void release();

 private:
  THD* thd_ = nullptr;
  MDL_ticket* ticket_ = nullptr;
};

struct ResolvedTable {
  std::string label;  // "db.table" as the user named it
  std::string db, table;  // as the server's privilege checks and metadata locks name them
  q4m::Subscription subscription;
  bool names_subscription = false;  // 'table@name': subscription.table is the subscription
  HeldMetadataLock metadata_lock;  // only with TableArgument::hold_metadata_lock
};

// False if an SQL error was raised; the message names the function, argument and table.
bool resolve_table(THD* thd, const TableArgument& arg, ResolvedTable* out);

// The same for a table named by its database and name apart (no condition).
bool resolve_table_names(THD* thd, const TableArgument& a, const std::string& db, const std::string& table,
                         ResolvedTable* out);

// The same for a function whose one argument is a table with no condition (queue_compact,
// queue_stats, queue_take_dead): evaluates `arg`, refusing NULL.
bool resolve_table_argument(THD* thd, Item* arg, const char* function, privilege_t privileges, ResolvedTable* out,
                            bool hold_metadata_lock = false);

}  // namespace q4m_functions
