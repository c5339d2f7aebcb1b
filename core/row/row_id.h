#pragma once
#include <cstdint>

namespace q4m {

// A row's id: > 0, strictly increasing in insert order, stable for the row's life (kept by
// compaction, copied by nothing else).
using RowId = uint64_t;

}  // namespace q4m
