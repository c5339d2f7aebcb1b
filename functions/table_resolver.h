// Resolves a queue function's table argument "[db.]table[:condition]" to the open
// QueueTable (and compiled condition), telling apart "does not exist" and "is not a
// QUEUE table" through the server's table definition cache, and checking privileges.
#pragma once
#include <my_global.h>
#include <sql_acl.h>

#include <memory>
#include <string>
#include <string_view>

#include "../storage/consumer.h"

class THD;

namespace q4m_functions {

struct TableArgument {
  const char* function;   // "queue_wait", for messages
  unsigned position;      // 1-based argument number
  std::string_view text;  // the argument as given
  bool allow_condition;   // queue_wait only
  privilege_t privileges; // needed on the table, e.g. SELECT_ACL | DELETE_ACL
};

struct ResolvedTable {
  std::string label;  // "db.table" as the user named it
  q4m::Subscription subscription;
};

// False if an SQL error was raised; the message names the function, argument and table.
bool resolve_table(THD* thd, const TableArgument& arg, ResolvedTable* out);

}  // namespace q4m_functions
