// A read-only server (a replica, or a primary being demoted) takes no rows out of a queue:
// a consumer there would remove rows the primary still hands out. The same rule as the
// server's for DML: READ ONLY ADMIN and the replication applier are exempt.
#pragma once

#include <string>

class THD;

namespace q4m_functions {

// True (with the SQL error raised) if `function` may not change `table` on this server now.
bool refused_on_read_only(THD* thd, const char* function, const std::string& table);

}  // namespace q4m_functions
