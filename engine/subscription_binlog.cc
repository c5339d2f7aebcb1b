#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>

#include "engine/subscription_binlog.h"

#include <cctype>
#include <cstdlib>

#include "core/table/subscription_log.h"
#include "engine/binlog_statements.h"

namespace q4m_engine {

namespace {

std::string id_list(const std::vector<q4m::RowId>& ids) {
  std::string out;
  for (q4m::RowId id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

class BinlogSubscriptionLog final : public q4m::SubscriptionLog {
 public:
  q4m::Status subscribed(const q4m::QueueTable& table, std::string_view name, std::string_view condition,
                         q4m::RowId start) override {
    return log_standalone_statement(table, "a subscription", [&](const std::string& db, const std::string& t) {
      return "SET @queue_subscribed = queue_apply_subscribe(" + quoted_literal(db) + "," + quoted_literal(t) + "," +
             quoted_literal(std::string(name)) + "," + quoted_literal(std::string(condition)) + ",'" +
             std::to_string(start) + "')";
    });
  }
  q4m::Status unsubscribed(const q4m::QueueTable& table, std::string_view name) override {
    return log_standalone_statement(table, "the drop of a subscription", [&](const std::string& db, const std::string& t) {
      return "SET @queue_unsubscribed = queue_apply_unsubscribe(" + quoted_literal(db) + "," + quoted_literal(t) +
             "," + quoted_literal(std::string(name)) + ")";
    });
  }
  q4m::Status ended(const q4m::QueueTable& table, std::string_view name, const std::vector<q4m::RowId>& ended,
                    const std::vector<q4m::RowId>& removed) override {
    return log_standalone_statement(table, "a subscription's ends", end_statement(name, ended, removed));
  }
  q4m::Status ended_in_transaction(const q4m::QueueTable& table, std::string_view name,
                                   const std::vector<q4m::RowId>& ended, const std::vector<q4m::RowId>& removed) override {
    return log_transactional_statement(table, "a subscription's ends", end_statement(name, ended, removed));
  }

 private:
  static std::function<std::string(const std::string&, const std::string&)> end_statement(
      std::string_view name, const std::vector<q4m::RowId>& ended, const std::vector<q4m::RowId>& removed) {
    return [name = std::string(name), e = id_list(ended), r = id_list(removed)](const std::string& db, const std::string& t) {
      return "SET @queue_sub_ended = queue_apply_sub_end(" + quoted_literal(db) + "," + quoted_literal(t) + "," +
             quoted_literal(name) + ",'" + e + "','" + r + "')";
    };
  }
};

BinlogSubscriptionLog& log_instance() {
  static BinlogSubscriptionLog log;
  return log;
}

}  // namespace

void install_subscription_binlog() { q4m::SubscriptionLog::set(&log_instance()); }
void uninstall_subscription_binlog() { q4m::SubscriptionLog::set(nullptr); }

bool parse_row_ids(const std::string& text, std::vector<q4m::RowId>* ids, std::string* error) {
  ids->clear();
  if (text.empty()) return true;
  const char* p = text.c_str();
  for (;;) {
    if (!isdigit(static_cast<unsigned char>(*p))) break;
    char* end = nullptr;
    const unsigned long long id = strtoull(p, &end, 10);
    p = end;
    if (id == 0 || id > (UINT64_MAX >> 1) || (!ids->empty() && id <= ids->back())) break;
    ids->push_back(id);
    if (!*p) return true;
    if (*p != ',' || !p[1]) break;
    p++;
  }
  *error = "expected increasing row ids '<id>[,<id>...]' or '', got '" + text.substr(0, 64) + "'";
  return false;
}

}  // namespace q4m_engine
