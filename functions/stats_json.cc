#include "functions/stats_json.h"

#include <cstdio>
#include <utility>
#include <vector>

namespace q4m_functions {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string stats_json(const std::string& table_label, q4m::QueueTable& table) {
  const q4m::TableStats stats = table.info();
  std::string out = "{\"table\": " + quoted(table_label);
  for (const q4m::Figure& figure : q4m::kTableFigures) {
    out += ", \"";
    out += figure.json;
    out += "\": " + std::to_string(stats.*figure.field);
  }
  return out + "}";
}

}  // namespace q4m_functions
