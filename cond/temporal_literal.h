// Converts string literals compared with DATE/DATETIME/TIME columns into the
// integers those columns decode to (YYYYMMDD, YYYYMMDDhhmmss, signed hhmmss),
// once, at compile time.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace q4m::cond {

struct DateLiteral {
  int64_t date = 0;        // YYYYMMDD
  int64_t datetime = 0;    // YYYYMMDDhhmmss
  bool has_time = false;   // a time of day other than 00:00:00 was given
};

// 'YYYY-MM-DD' or 'YYYY-MM-DD hh:mm[:ss]' ('T' may separate date and time). A
// fraction of a second is accepted only if it is zero. On failure returns false
// and sets *why.
bool parse_date_literal(std::string_view s, DateLiteral* out, std::string* why);

// '[-]h:mm[:ss]' (hours 0-838) -> signed hhmmss.
bool parse_time_literal(std::string_view s, int64_t* out, std::string* why);

}  // namespace q4m::cond
