#include "cond/compiled_filter.h"

#include <vector>

#include "core/util/stats.h"
#include "cond/evaluator.h"

namespace q4m::cond {

namespace {
// Cells for conditions referencing few columns live on the stack; wider ones use
// a per-thread buffer that grows once, so evaluation never allocates after warm-up.
constexpr uint32_t kStackCells = 16;
}  // namespace

bool CompiledFilter::matches(std::string_view payload) const {
  global_stats().cond_evals.add();
  Cell stack_cells[kStackCells];
  Cell* cells = stack_cells;
  if (program_.cell_count > kStackCells) {
    thread_local std::vector<Cell> wide;
    if (wide.size() < program_.cell_count) wide.resize(program_.cell_count);
    cells = wide.data();
  }
  if (!load_cells(program_, payload, cells)) return false;
  return Evaluator(program_, cells).truth(program_.root) == Truth::kTrue;
}

}  // namespace q4m::cond
