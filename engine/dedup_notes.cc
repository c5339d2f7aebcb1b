#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_error.h>

#include "engine/dedup_notes.h"

#include <chrono>
#include <string>

#include "core/table/transaction.h"
#include "engine/sql_errors.h"

namespace q4m_engine {

namespace {

// `dropped` rows of `table_label` were not inserted: duplicates within the window of
// DEDUP_COLUMN `column` (`window_s` seconds).
void note_duplicates(THD* thd, const std::string& table_label, size_t dropped, const std::string& column,
                     unsigned long long window_s) {
  if (dropped == 0) return;
  push_warning_printf(thd, Sql_condition::WARN_LEVEL_NOTE, ER_DUP_ENTRY,
                      "QUEUE table '%s': %zu %s not inserted: a row with the same DEDUP_COLUMN `%s` value was "
                      "inserted less than DEDUP_WINDOW (%llu s) ago",
                      table_label.c_str(), dropped, dropped == 1 ? "row was" : "rows were", column.c_str(), window_s);
}

}  // namespace

void note_duplicates(THD* thd, const q4m::Transaction& txn) {
  for (const q4m::Transaction::Duplicates& d : txn.duplicates()) {
    const auto options = d.table->options();
    const std::string column = options->dedup ? options->dedup->name : "?";
    const auto window = std::chrono::duration_cast<std::chrono::seconds>(options->dedup_window).count();
    note_duplicates(thd, table_label_of_path(d.table->path()), d.dropped, column,
                    static_cast<unsigned long long>(window));
  }
}

}  // namespace q4m_engine
