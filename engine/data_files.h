// The QUEUE data files of the datadir: ./<db>/<table>.Q4M (the server's cwd is the datadir;
// the handler gives the registry the same paths), names in the server's file-name encoding.
#pragma once
#include <functional>
#include <string>

namespace q4m_engine {

// fn(db, table, path) for each data file (ALTER/TRUNCATE work files skipped), the names
// decoded; stops when fn returns false.
void for_each_data_file(const std::function<bool(const std::string& db, const std::string& table,
                                                 const std::string& path)>& fn);

}  // namespace q4m_engine
