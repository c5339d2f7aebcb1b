#include "saved_globals.h"

namespace q4m::bench {

void SavedGlobals::set(client::DbConn& admin, const std::string& name, const std::string& value) {
  bool known = false;
  for (const auto& saved : saved_)
    if (saved.first == name) known = true;
  if (!known) saved_.emplace_back(name, admin.scalar("SELECT @@GLOBAL." + name));
  admin.exec("SET GLOBAL " + name + " = " + value);
}

void SavedGlobals::restore(client::DbConn& admin) {
  for (const auto& [name, value] : saved_) {
    const bool number = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
    admin.exec("SET GLOBAL " + name + " = " + (number ? value : "'" + value + "'"));
  }
}

}  // namespace q4m::bench
