// The RowFilter handed to the queue core: a compiled Program plus the per-row
// work (payload walk + evaluation). Immutable; safe to share between threads.
#pragma once
#include <string_view>

#include "core/row/filter.h"
#include "cond/program.h"

namespace q4m::cond {

class CompiledFilter final : public RowFilter {
 public:
  explicit CompiledFilter(Program program) : program_(std::move(program)) {}
  // True only if the condition is TRUE for the row (FALSE, NULL and a payload
  // that does not fit the schema all mean "no match"). Counts global cond_evals.
  bool matches(std::string_view payload) const override;

  const Program& program() const { return program_; }

 private:
  Program program_;
};

}  // namespace q4m::cond
