#include "cond/temporal_literal.h"

namespace q4m::cond {
namespace {

// Reads between min and max decimal digits at *pos.
bool digits(std::string_view s, size_t* pos, int min, int max, int64_t* out) {
  int n = 0;
  int64_t v = 0;
  while (*pos < s.size() && n < max && s[*pos] >= '0' && s[*pos] <= '9') {
    v = v * 10 + (s[*pos] - '0');
    (*pos)++;
    n++;
  }
  *out = v;
  return n >= min;
}

bool expect(std::string_view s, size_t* pos, char c) {
  if (*pos < s.size() && s[*pos] == c) { (*pos)++; return true; }
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Optional ".ffffff" that must be zero: conditions compare whole seconds.
bool zero_fraction(std::string_view s, size_t* pos, std::string* why) {
  if (!expect(s, pos, '.')) return true;
  size_t start = *pos;
  bool nonzero = false;
  while (*pos < s.size() && s[*pos] >= '0' && s[*pos] <= '9') nonzero |= s[(*pos)++] != '0';
  if (*pos == start || *pos - start > 6) { *why = "malformed fraction of a second"; return false; }
  if (nonzero) { *why = "fractional seconds are not supported (conditions compare whole seconds)"; return false; }
  return true;
}

// "h:mm[:ss]" with hours up to max_hour.
bool clock(std::string_view s, size_t* pos, int64_t max_hour, int max_hour_digits, int64_t* hms,
           std::string* why) {
  int64_t h = 0, m = 0, sec = 0;
  if (!digits(s, pos, 1, max_hour_digits, &h) || !expect(s, pos, ':') || !digits(s, pos, 2, 2, &m)) {
    *why = "malformed time of day";
    return false;
  }
  if (expect(s, pos, ':') && !digits(s, pos, 2, 2, &sec)) { *why = "malformed seconds"; return false; }
  if (h > max_hour || m > 59 || sec > 59) { *why = "hour, minute or second out of range"; return false; }
  if (!zero_fraction(s, pos, why)) return false;
  *hms = h * 10000 + m * 100 + sec;
  return true;
}

}  // namespace

bool parse_date_literal(std::string_view s, DateLiteral* out, std::string* why) {
  s = trim(s);
  size_t pos = 0;
  int64_t y = 0, mo = 0, d = 0, hms = 0;
  if (!digits(s, &pos, 4, 4, &y) || !expect(s, &pos, '-') || !digits(s, &pos, 1, 2, &mo) ||
      !expect(s, &pos, '-') || !digits(s, &pos, 1, 2, &d)) {
    *why = "expected 'YYYY-MM-DD' or 'YYYY-MM-DD hh:mm:ss'";
    return false;
  }
  if (mo > 12 || d > 31) { *why = "month or day out of range"; return false; }
  if (pos < s.size()) {
    if (s[pos] != ' ' && s[pos] != 'T') {
      *why = "expected 'YYYY-MM-DD' or 'YYYY-MM-DD hh:mm:ss'";
      return false;
    }
    pos++;
    if (!clock(s, &pos, 23, 2, &hms, why)) return false;
  }
  if (pos != s.size()) { *why = "unexpected text after the date"; return false; }
  out->date = y * 10000 + mo * 100 + d;
  out->datetime = out->date * 1000000 + hms;
  out->has_time = hms != 0;
  return true;
}

bool parse_time_literal(std::string_view s, int64_t* out, std::string* why) {
  s = trim(s);
  size_t pos = 0;
  bool negative = expect(s, &pos, '-');
  int64_t hms = 0;
  if (!clock(s, &pos, 838, 3, &hms, why)) {
    if (why->rfind("malformed", 0) == 0) *why = "expected '[-]hh:mm:ss'";
    return false;
  }
  if (pos != s.size()) { *why = "unexpected text after the time"; return false; }
  *out = negative ? -hms : hms;
  return true;
}

}  // namespace q4m::cond
