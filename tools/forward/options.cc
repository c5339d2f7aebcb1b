#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace q4m::forward {
namespace {

// Splits "k=v;k=v" honouring "\;" and "\\" so passwords may contain ';'.
std::vector<std::string> split_fields(const std::string& spec) {
  std::vector<std::string> fields;
  std::string current;
  for (size_t i = 0; i < spec.size(); ++i) {
    char c = spec[i];
    if (c == '\\' && i + 1 < spec.size()) {
      current += spec[++i];
    } else if (c == ';') {
      fields.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  fields.push_back(current);
  return fields;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

uint64_t parse_unsigned(const std::string& text, const char* what, uint64_t max) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(std::string(what) + ": expected a non-negative integer, got '" + text + "'");
  errno = 0;
  unsigned long long v = strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v > max)
    throw UsageError(std::string(what) + ": " + text + " is out of range (max " + std::to_string(max) + ")");
  return v;
}

double parse_seconds(const std::string& text, const char* what, bool allow_zero) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < 0 || (!allow_zero && v == 0))
    throw UsageError(std::string(what) + ": expected a number of seconds" + (allow_zero ? "" : " > 0") +
                     ", got '" + text + "'");
  return v;
}

}  // namespace

std::string Endpoint::describe() const {
  std::string where = !socket.empty() ? "socket " + socket
                      : !host.empty() ? host + ":" + std::to_string(port ? port : 3306)
                                      : "localhost";
  return "`" + db + "`.`" + table + "` at " + where;
}

Endpoint parse_endpoint(const std::string& spec, const char* which) {
  Endpoint ep;
  for (const std::string& raw : split_fields(spec)) {
    std::string field = trim(raw);
    if (field.empty()) continue;
    size_t eq = field.find('=');
    if (eq == std::string::npos) throw UsageError(std::string(which) + ": '" + field + "' is not key=value");
    std::string key = trim(field.substr(0, eq));
    std::string value = field.substr(eq + 1);
    if (key != "password") value = trim(value);
    if (key == "host") ep.host = value;
    else if (key == "port") ep.port = static_cast<unsigned>(parse_unsigned(value, "port", 65535));
    else if (key == "socket") ep.socket = value;
    else if (key == "user") ep.user = value;
    else if (key == "password") { ep.password = value; ep.has_password = true; }
    else if (key == "defaults_file") ep.defaults_file = value;
    else if (key == "db" || key == "database") ep.db = value;
    else if (key == "table") ep.table = value;
    else throw UsageError(std::string(which) + ": unknown key '" + key +
                          "' (known: host, port, socket, user, password, defaults_file, db, table)");
  }
  if (ep.db.empty()) throw UsageError(std::string(which) + ": db= is required");
  return ep;
}

bool parse_options(const std::vector<std::string>& args, Options* out) {
  Options o;
  bool have_src = false, have_dst = false, have_id = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    if (name == "-h" || name == "--help") { fputs(usage_text(), stdout); return false; }
    if (name == "--version") { puts("q4m-forward 1.0"); return false; }
    size_t eq = name.find('=');
    if (name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      if (name.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + name + "'");
      if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
      value = args[++i];
    }
    if (name == "--src") { o.src = parse_endpoint(value, "--src"); have_src = true; }
    else if (name == "--dst") { o.dst = parse_endpoint(value, "--dst"); have_dst = true; }
    else if (name == "--source-id") { o.source_id = static_cast<uint32_t>(parse_unsigned(value, name.c_str(), UINT32_MAX)); have_id = true; }
    else if (name == "--wait-timeout") o.wait_timeout = parse_seconds(value, name.c_str(), false);
    else if (name == "--max-rows") o.max_rows = parse_unsigned(value, name.c_str(), UINT64_MAX);
    else if (name == "--batch") {
      o.batch = static_cast<unsigned>(parse_unsigned(value, name.c_str(), kMaxBatch));
      if (o.batch == 0) throw UsageError("--batch: expected 1 to " + std::to_string(kMaxBatch) + " rows, got 0");
    }
    else if (name == "--idle-exit") o.idle_exit = parse_seconds(value, name.c_str(), true);
    else if (name == "--stats-interval") o.stats_interval = parse_seconds(value, name.c_str(), true);
    else if (name == "--io-timeout") o.io_timeout = parse_seconds(value, name.c_str(), false);
    else if (name == "--max-backoff") o.max_backoff = parse_seconds(value, name.c_str(), false);
    else throw UsageError("unknown option '" + name + "' (see --help)");
  }
  if (!have_src || !have_dst) throw UsageError("--src and --dst are required (see --help)");
  if (!have_id) throw UsageError("--source-id is required: a number that identifies this source table at the destination");
  if (o.src.table.empty()) throw UsageError("--src: table= is required");
  if (o.dst.table.empty()) o.dst.table = o.src.table;
  *out = o;
  return true;
}

const char* usage_text() {
  return
      "usage: q4m-forward --src SPEC --dst SPEC --source-id N [options]\n"
      "Moves rows from a QUEUE table on one server to a QUEUE table on another, with no loss\n"
      "and no duplication across crashes of either server or of this process.\n"
      "\n"
      "  SPEC              key=value;... with keys host, port, socket, user, password,\n"
      "                    defaults_file (my.cnf read for [client]), db, table\n"
      "                    ('\\;' for a literal ';'). --dst table defaults to --src table.\n"
      "  --source-id N     id of this source table at the destination (0..4294967295);\n"
      "                    never reuse it for another source, use a new one if the source\n"
      "                    table is re-created\n"
      "  --wait-timeout S  seconds per queue_wait() on the source (default 1)\n"
      "  --batch N         rows per round trip, 1 to 10000 (default 100); 1 speaks the\n"
      "                    one-row protocol of the original Q4M (queue_wait, one INSERT)\n"
      "  --max-rows N      exit 0 after relaying N rows (default 0 = no limit)\n"
      "  --idle-exit S     exit 0 after S seconds without a row (default 0 = never)\n"
      "  --stats-interval S  seconds between metrics lines (default 10, 0 = only at exit)\n"
      "  --io-timeout S    connect/read/write timeout of both connections (default 30)\n"
      "  --max-backoff S   longest delay between reconnect attempts (default 10)\n"
      "Exit codes: 0 done (max rows, idle exit, SIGTERM/SIGINT), 1 configuration error,\n"
      "2 fatal runtime error.\n";
}

}  // namespace q4m::forward
