// queue_wait(tbl [, tbl ...] [, timeout]) argument rules (docs/sql-api.md):
// only the LAST argument may be a timeout; it is one if it is a number, NULL, or a
// string that reads as a number (clients that bind every parameter as a string).
#pragma once
#include <my_global.h>

#include <chrono>
#include <string>
#include <vector>

class Item;
class THD;

namespace q4m_functions {

constexpr std::chrono::milliseconds kDefaultWaitTimeout{60000};

struct WaitArguments {
  std::vector<std::string> tables;  // table arguments in priority order
  std::vector<const CHARSET_INFO*> charsets;  // each one's character set (its condition's literals)
  std::chrono::milliseconds timeout = kDefaultWaitTimeout;
};

// Evaluates and checks the arguments. False if an SQL error was raised.
bool parse_wait_arguments(Item** args, unsigned count, WaitArguments* out);

// queue_wait_batch(tbl, max_rows [, timeout]): one table (a condition allowed), how many
// rows at most (1..kMaxBatchRows), and the timeout as in queue_wait().
constexpr uint64_t kMaxBatchRows = 10000;
struct BatchWaitArguments {
  std::string table;
  const CHARSET_INFO* charset = nullptr;  // the table argument's (its condition's literals)
  size_t max_rows = 1;
  std::chrono::milliseconds timeout = kDefaultWaitTimeout;
};
// `count` is 2 or 3 (the function's builder checks). False if an SQL error was raised.
bool parse_batch_wait_arguments(Item** args, unsigned count, BatchWaitArguments* out);

// A duration argument in seconds: a number, or a string that reads as one (fractions
// allowed). Larger values are capped at max_seconds.
struct SecondsRule {
  const char* function;  // for the message: "queue_wait"
  unsigned position;     // 1-based
  const char* noun;      // "timeout", "lease"
  bool zero_allowed;
  double max_seconds;
};
// False (an SQL error naming the function and argument raised) if the value is NULL, not a
// number, negative, or 0 when the rule does not allow it.
bool parse_seconds(Item* item, const SecondsRule& rule, std::chrono::milliseconds* out);

// A string argument: false (the SQL error "<function>(): argument <position>: <noun> is NULL"
// raised) if it is NULL.
bool parse_string(Item* item, const char* function, unsigned position, const char* noun, std::string* out);

// A count argument: a whole number from rule.min to rule.max (a string that reads as one too).
struct WholeNumberRule {
  const char* function;  // "queue_purge_dead"
  unsigned position;     // 1-based
  const char* noun;      // "max_rows", "row id"
  uint64_t min, max;
};
// False (an SQL error naming the function, argument and value raised) otherwise.
bool parse_whole_number(Item* item, const WholeNumberRule& rule, uint64_t* out);

// True if `s` is a decimal number ("10", "-1", "0.25", "1e3"), surrounding blanks allowed.
bool looks_numeric(const std::string& s);

}  // namespace q4m_functions
