// Errors from either server, classified by what the relay should do about them.
#pragma once

#include <stdexcept>
#include <string>

namespace q4m::forward {

enum class ErrorKind {
  kTransient,  // connection lost / server restarting / interrupted: reconnect and retry
  kConfig,     // wrong credentials, missing table/column/plugin: restarting will not help (exit 1)
  kFatal,      // anything else (exit 2; a supervisor may restart us)
  kConflict,   // the destination's record for our source id is ahead of this source: another
               // producer uses the id, or the source was re-created. Restarting would drop
               // (lose) rows as replays: exit 3, which the documented unit does not restart
};

struct DbError : std::runtime_error {
  DbError(ErrorKind kind, unsigned code, const std::string& message)
      : std::runtime_error(message), kind(kind), code(code) {}
  ErrorKind kind;
  unsigned code;  // server or client error number, 0 if raised by the relay itself
};

// Kind of a MariaDB client/server error number.
ErrorKind classify_error(unsigned code);

}  // namespace q4m::forward
