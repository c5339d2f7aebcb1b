// Command line of q4m-forward (documented in docs/forward.md).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace q4m::forward {

// One side of the relay: "host=..;port=..;socket=..;user=..;password=..;db=..;table=..".
struct Endpoint {
  std::string host;  // empty = localhost (the socket)
  unsigned port = 0;
  std::string socket;
  std::string user;
  std::string password;
  bool has_password = false;
  std::string defaults_file;  // a my.cnf-style file read for the [client] group (keeps secrets out of argv)
  std::string db;
  std::string table;

  std::string describe() const;  // for logs; never shows the password
};

constexpr unsigned kMaxBatch = 10000;  // queue_wait_batch()'s and queue_set_srcid()'s limit

struct Options {
  Endpoint src;
  Endpoint dst;
  uint32_t source_id = 0;
  double wait_timeout = 1.0;   // seconds per queue_wait(); also bounds the reaction to SIGTERM
  uint64_t max_rows = 0;       // 0 = unlimited
  unsigned batch = 100;        // rows per round trip; 1 = Q4M's one-row protocol
  double idle_exit = 0;        // 0 = never; else exit 0 after this long without a row
  double stats_interval = 10;  // 0 = only at exit
  double io_timeout = 30;      // read/write/connect timeout of both connections
  double max_backoff = 10;     // ceiling of the reconnect delay
};

// Thrown for invalid command lines (exit code 1).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Endpoint parse_endpoint(const std::string& spec, const char* which);

// Returns false if --help/--version was printed (exit 0). Throws UsageError.
bool parse_options(const std::vector<std::string>& args, Options* out);

const char* usage_text();

}  // namespace q4m::forward
