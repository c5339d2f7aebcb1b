#include "message_codec.h"

#include <cstdlib>

namespace q4m::bench {

MessageCodec::MessageCodec(std::string table, const PayloadSpec& payload)
    : table_(std::move(table)), payload_(payload),
      insert_prefix_("INSERT INTO " + table_ + (payload.enabled() ? " (v,s) VALUES " : " (v) VALUES ")) {}

void MessageCodec::append_values(uint64_t id, std::string* sql) const {
  sql->push_back('(');
  sql->append(std::to_string(id));
  if (payload_.enabled()) {
    sql->append(",'");
    payload_.append(id, sql);
    sql->push_back('\'');
  }
  sql->push_back(')');
}

void MessageCodec::insert_sql(uint64_t id, std::string* sql) const {
  sql->assign(insert_prefix_);
  append_values(id, sql);
}

void MessageCodec::decode(const char* const* row, const unsigned long* lengths, unsigned v_col,
                          Delivered* out) const {
  // An id that cannot be parsed becomes one nobody sent, so verification reports it.
  out->id = row[v_col] ? std::strtoull(row[v_col], nullptr, 10) : ~0ull;
  if (payload_.enabled())
    out->payload_ok = row[v_col + 1] && payload_.matches(out->id, row[v_col + 1], lengths[v_col + 1]);
  else
    out->payload_ok = true;
}

}  // namespace q4m::bench
