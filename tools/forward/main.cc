// q4m-forward: relays rows from a QUEUE table on one server to a QUEUE table on another
// with no loss and no duplication (see docs/forward.md).
#include <mysql.h>

#include <string>
#include <vector>

#include "log.h"
#include "options.h"
#include "relay.h"
#include "shutdown.h"

int main(int argc, char** argv) {
  using namespace q4m::forward;
  Options opt;
  try {
    if (!parse_options(std::vector<std::string>(argv + 1, argv + argc), &opt)) return kExitDone;
  } catch (const UsageError& e) {
    log_line("%s", e.what());
    return kExitConfig;
  }
  install_shutdown_handlers();
  if (mysql_library_init(0, nullptr, nullptr)) {
    log_line("cannot initialise the MariaDB client library");
    return kExitFatal;
  }
  ExitCode code = Relay(opt).run();
  mysql_library_end();
  log_line("exit %d", static_cast<int>(code));
  return code;
}
