// Server variables (queue_*) mapped onto q4m::settings() (storage/settings.h).
#pragma once

struct st_mysql_sys_var;

namespace q4m_engine {

extern st_mysql_sys_var* queue_system_variables[];

// Copies the variables' current values (command line / my.cnf) into q4m::settings().
void apply_system_variables();

}  // namespace q4m_engine
