#include "repeats.h"

#include <algorithm>

namespace q4m::bench {

RunResult combine_repeats(std::vector<RunResult> runs) {
  std::vector<double> rates;
  for (const auto& r : runs) rates.push_back(r.rate);
  // A failure is what must be seen, not hidden behind a good median.
  auto failed = std::find_if(runs.begin(), runs.end(), [](const RunResult& r) { return !r.ok(); });
  RunResult chosen;
  if (failed != runs.end()) {
    chosen = *failed;
  } else {
    std::sort(runs.begin(), runs.end(), [](const RunResult& a, const RunResult& b) { return a.rate < b.rate; });
    chosen = runs[(runs.size() - 1) / 2];  // lower median for an even count
  }
  chosen.repeat_rates = rates;
  return chosen;
}

}  // namespace q4m::bench
