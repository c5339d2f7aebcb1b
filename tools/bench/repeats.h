// Repeated runs of one configuration: on a shared or noisy machine a single run
// can be off by 2x, so --repeat N reports the median run (by rate) and keeps
// every run's rate. A configuration fails if any of its runs failed.
#pragma once
#include <vector>

#include "scenarios.h"

namespace q4m::bench {

// `runs` are repeats of the same scenario/engine/sync/concurrency (at least one).
RunResult combine_repeats(std::vector<RunResult> runs);

}  // namespace q4m::bench
