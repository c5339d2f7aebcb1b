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

std::string MessageCodec::insert_statement(uint64_t rows) const {
  std::string sql = insert_prefix_;
  for (uint64_t i = 0; i < rows; ++i) sql += (i ? "," : "") + std::string(payload_.enabled() ? "(?,?)" : "(?)");
  return sql;
}

void MessageCodec::run_insert_batch(client::DbStatement& insert, uint64_t first, uint64_t count,
                                    std::vector<std::string>* payloads, std::vector<client::Param>* params) const {
  params->clear();
  if (payload_.enabled()) {
    payloads->resize(count);  // filled first: params point into these strings
    for (uint64_t i = 0; i < count; ++i) {
      (*payloads)[i].clear();
      payload_.append(first + i, &(*payloads)[i]);
    }
  }
  for (uint64_t i = 0; i < count; ++i) {
    params->emplace_back(first + i);
    if (payload_.enabled()) params->emplace_back(std::string_view((*payloads)[i]));
  }
  insert.run(params->data(), params->size());
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
