// How a benchmark message travels as SQL: the INSERT that enqueues it and the
// decoding of a fetched row (id column `v`, optional payload column `s`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../common/db_statement.h"
#include "payload.h"

namespace q4m::bench {

struct Delivered {
  uint64_t id = 0;
  bool payload_ok = true;
};

class MessageCodec {
 public:
  MessageCodec(std::string table, const PayloadSpec& payload);

  const std::string& table() const { return table_; }
  const PayloadSpec& payload() const { return payload_; }
  // "INSERT INTO t (v[,s]) VALUES " — the prefix of every enqueue.
  const std::string& insert_prefix() const { return insert_prefix_; }
  // Appends "(id[,'payload'])".
  void append_values(uint64_t id, std::string* sql) const;
  // "INSERT INTO t (v[,s]) VALUES (?[,?])[,(?[,?])...]": `rows` messages, parameters given
  // by run_insert_batch().
  std::string insert_statement(uint64_t rows = 1) const;
  // Runs insert_statement(count) for messages [first, first+count).
  void run_insert_batch(client::DbStatement& insert, uint64_t first, uint64_t count,
                        std::vector<std::string>* payloads, std::vector<client::Param>* params) const;
  // Fills `out` from a fetched row whose id is text column `v_col` (payload follows it).
  void decode(const char* const* row, const unsigned long* lengths, unsigned v_col,
              Delivered* out) const;

 private:
  std::string table_;
  PayloadSpec payload_;
  std::string insert_prefix_;
};

}  // namespace q4m::bench
