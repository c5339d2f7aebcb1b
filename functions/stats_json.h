// queue_stats() output: one table's info and counters as a JSON object.
#pragma once
#include <string>

#include "core/table/queue_table.h"

namespace q4m_functions {

std::string stats_json(const std::string& table_label, q4m::QueueTable& table);

}  // namespace q4m_functions
