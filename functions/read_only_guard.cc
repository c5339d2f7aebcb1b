#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>

#include "functions/read_only_guard.h"

namespace q4m_functions {

bool refused_on_read_only(THD* thd, const char* function, const std::string& table) {
  if (!thd->is_read_only_ctx()) return false;
  my_printf_error(ER_OPTION_PREVENTS_STATEMENT,
                  "%s(): table '%s': the server runs with --read-only (a replica?), and taking or removing "
                  "rows changes the queue: consume on the primary",
                  MYF(0), function, table.c_str());
  return true;
}

}  // namespace q4m_functions
