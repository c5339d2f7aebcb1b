// Evaluates a Program against one row. Everything here is read-only over the
// Program and the payload: no allocation, no shared mutable state, so any number
// of threads may evaluate the same Program concurrently.
#pragma once
#include <cstdint>
#include <string_view>

#include "cond/program.h"

namespace q4m::cond {

// The bytes of one referenced column of the current row.
struct Cell {
  const unsigned char* p = nullptr;
  uint32_t len = 0;
  bool null = true;
};

// SQL three-valued logic; a row matches only on kTrue.
enum class Truth : uint8_t { kFalse, kTrue, kNull };

struct IntValue { Int v; bool null; };
struct RealValue { double v; bool null; };
struct StrValue { std::string_view v; bool null; };

// Walks the payload once (up to the last referenced column) and fills
// cells[0 .. prog.cell_count). Returns false if the payload is malformed.
bool load_cells(const Program& prog, std::string_view payload, Cell* cells);

class Evaluator {
 public:
  // `cells` may be null when the nodes evaluated reference no column (constant folding).
  Evaluator(const Program& prog, const Cell* cells) : prog_(prog), nodes_(prog.nodes.data()), cells_(cells) {}

  Truth truth(uint32_t node) const;      // any node type: non-zero numbers are true
  IntValue integer(uint32_t node) const;  // node.type == kInt
  RealValue real(uint32_t node) const;    // node.type == kDouble
  StrValue string(uint32_t node) const;   // node.type == kString

 private:
  bool is_null(uint32_t node) const;
  Truth compare(const Node& n) const;
  // <0, 0, >0: under the node's collation, or byte for byte.
  int compare_strings(const Node& n, std::string_view x, std::string_view y) const;
  Truth in_list(const Node& n) const;
  IntValue arithmetic(const Node& n) const;
  RealValue real_arithmetic(const Node& n) const;

  const Program& prog_;
  const Node* nodes_;
  const Cell* cells_;
};

}  // namespace q4m::cond
