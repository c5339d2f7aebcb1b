#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item.h>

#include <cmath>
#include <cstdlib>

#include "functions/wait_arguments.h"

namespace q4m_functions {

namespace {

// Longer waits are capped here (about 68 years): "forever" in practice.
constexpr double kMaxTimeoutSeconds = 2147483647.0;

bool is_number_type(Item* item) {
  Item_result r = item->result_type();
  return r == INT_RESULT || r == REAL_RESULT || r == DECIMAL_RESULT;
}

bool is_null_literal(Item* item) {
  return item->type() == Item::NULL_ITEM || item->field_type() == MYSQL_TYPE_NULL;
}

void raise(unsigned position, const std::string& what) {
  my_printf_error(ER_WRONG_ARGUMENTS, "queue_wait(): argument %u: %s", MYF(0), position,
                  what.c_str());
}

std::string shown(Item* item) {
  StringBuffer<64> buf;
  String* s = item->val_str(&buf);
  if (!s || item->null_value) return "NULL";
  return std::string(s->ptr(), s->length());
}

}  // namespace

bool parse_string(Item* item, const char* function, unsigned position, const char* noun, std::string* out) {
  StringBuffer<256> buf;
  String* s = item->val_str(&buf);
  if (!s || item->null_value) {
    my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument %u: %s is NULL", MYF(0), function, position, noun);
    return false;
  }
  out->assign(s->ptr(), s->length());
  return true;
}

bool looks_numeric(const std::string& s) {
  size_t i = 0, n = s.size();
  auto blank = [&](size_t k) { return s[k] == ' ' || s[k] == '\t'; };
  auto digit = [&](size_t k) { return k < n && s[k] >= '0' && s[k] <= '9'; };
  while (i < n && blank(i)) i++;
  if (i < n && (s[i] == '+' || s[i] == '-')) i++;
  bool digits = false;
  while (digit(i)) { i++; digits = true; }
  if (i < n && s[i] == '.') {
    i++;
    while (digit(i)) { i++; digits = true; }
  }
  if (!digits) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < n && (s[j] == '+' || s[j] == '-')) j++;
    if (!digit(j)) return false;
    while (digit(j)) j++;
    i = j;
  }
  while (i < n && blank(i)) i++;
  return i == n;
}

bool parse_seconds(Item* item, const SecondsRule& rule, std::chrono::milliseconds* out) {
  double seconds = 0;
  bool null = false;
  std::string text;
  if (is_number_type(item)) {
    seconds = item->val_real();
    null = item->null_value;
  } else {
    text = shown(item);
    null = item->null_value || is_null_literal(item);
    if (!null && looks_numeric(text)) seconds = strtod(text.c_str(), nullptr);
    else if (!null) seconds = -1;  // not a number: refused below
  }
  if (null || !std::isfinite(seconds) || seconds < 0 || (seconds == 0 && !rule.zero_allowed)) {
    std::string value = null ? "NULL" : text.empty() ? shown(item) : text;
    my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument %u: invalid %s %s (expected a number of seconds %s)",
                    MYF(0), rule.function, rule.position, rule.noun, value.c_str(),
                    rule.zero_allowed ? ">= 0" : "> 0");
    return false;
  }
  if (seconds > rule.max_seconds) seconds = rule.max_seconds;
  // Round up so that a tiny positive value still counts instead of meaning 0.
  *out = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
  return true;
}

bool parse_wait_arguments(Item** args, unsigned count, WaitArguments* out) {
  unsigned table_count = count;
  if (count > 0) {
    Item* last = args[count - 1];
    bool is_timeout = is_number_type(last) || is_null_literal(last);
    if (!is_timeout) {
      // A string is a timeout if it reads as a number (or is NULL at run time).
      std::string text = shown(last);
      is_timeout = last->null_value || looks_numeric(text);
    }
    if (is_timeout) {
      if (count == 1) {
        my_printf_error(ER_WRONG_ARGUMENTS,
                        "queue_wait(): at least one table is required (the only argument is a "
                        "timeout)",
                        MYF(0));
        return false;
      }
      if (!parse_seconds(last, SecondsRule{"queue_wait", count, "timeout", true, kMaxTimeoutSeconds}, &out->timeout))
        return false;
      table_count = count - 1;
    }
  }
  if (table_count == 0) {
    my_printf_error(ER_WRONG_ARGUMENTS, "queue_wait(): at least one table is required", MYF(0));
    return false;
  }
  for (unsigned i = 0; i < table_count; i++) {
    Item* item = args[i];
    if (is_number_type(item)) {
      raise(i + 1, shown(item) + " is a number, but only the last argument may be a timeout");
      return false;
    }
    StringBuffer<256> buf;
    String* s = item->val_str(&buf);
    if (!s || item->null_value) {
      raise(i + 1, "table name is NULL");
      return false;
    }
    out->tables.emplace_back(s->ptr(), s->length());
    out->charsets.push_back(s->charset());
  }
  return true;
}

namespace {

// The table argument of queue_wait_batch(): a string, not NULL.
bool parse_batch_table(Item* item, std::string* out, const CHARSET_INFO** charset) {
  const char* problem = nullptr;
  std::string value;
  if (is_number_type(item)) {
    value = shown(item);
    problem = "is a number, expected a table name";
  } else {
    StringBuffer<256> buf;
    String* s = item->val_str(&buf);
    if (!s || item->null_value) problem = "table name is NULL";
    else {
      out->assign(s->ptr(), s->length());
      *charset = s->charset();
    }
  }
  if (!problem) return true;
  my_printf_error(ER_WRONG_ARGUMENTS, "queue_wait_batch(): argument 1: %s%s%s", MYF(0), value.c_str(),
                  value.empty() ? "" : " ", problem);
  return false;
}

// max_rows: a whole number from 1 to kMaxBatchRows (a string that reads as one too).
bool parse_max_rows(Item* item, size_t* out) {
  std::string text = shown(item);
  const bool null = item->null_value || is_null_literal(item);
  double v = -1;
  if (!null && (is_number_type(item) || looks_numeric(text))) v = strtod(text.c_str(), nullptr);
  if (null || !std::isfinite(v) || v != std::floor(v) || v < 1 || v > static_cast<double>(kMaxBatchRows)) {
    my_printf_error(ER_WRONG_ARGUMENTS,
                    "queue_wait_batch(): argument 2: invalid max_rows %s (expected a whole number from 1 to %llu)",
                    MYF(0), null ? "NULL" : text.c_str(), static_cast<unsigned long long>(kMaxBatchRows));
    return false;
  }
  *out = static_cast<size_t>(v);
  return true;
}

}  // namespace

bool parse_batch_wait_arguments(Item** args, unsigned count, BatchWaitArguments* out) {
  if (!parse_batch_table(args[0], &out->table, &out->charset) || !parse_max_rows(args[1], &out->max_rows)) return false;
  return count < 3 ||
         parse_seconds(args[2], SecondsRule{"queue_wait_batch", 3, "timeout", true, kMaxTimeoutSeconds}, &out->timeout);
}

}  // namespace q4m_functions

namespace q4m_functions {

bool parse_whole_number(Item* item, const WholeNumberRule& rule, uint64_t* out) {
  std::string text = shown(item);
  const bool null = item->null_value || is_null_literal(item);
  double v = -1;
  if (!null && (is_number_type(item) || looks_numeric(text))) v = strtod(text.c_str(), nullptr);
  if (null || !std::isfinite(v) || v != std::floor(v) || v < static_cast<double>(rule.min) ||
      v > static_cast<double>(rule.max)) {
    my_printf_error(ER_WRONG_ARGUMENTS, "%s(): argument %u: invalid %s %s (expected a whole number from %llu to %llu)",
                    MYF(0), rule.function, rule.position, rule.noun, null ? "NULL" : text.c_str(),
                    static_cast<unsigned long long>(rule.min), static_cast<unsigned long long>(rule.max));
    return false;
  }
  *out = static_cast<uint64_t>(v);
  return true;
}

}  // namespace q4m_functions
