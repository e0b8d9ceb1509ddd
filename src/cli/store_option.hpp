// Opening the store a command's --db names. The path's shape is checked when the command line is
// parsed (output_file: not a folder, in a folder that may be written in); what only SQLite can
// tell (a file that is no database, a store it may not write) is --db's problem too: InputError,
// exit code 2, not an internal error.
#pragma once

#include <string>

#include "cudal1/store/store.hpp"

namespace cudal1::cli {

// Opens the store at `db`, creating it when missing.
store::Store open_store(const std::string& db);

// Opens a store that must be there already, for commands that read what others recorded;
// `written_by` completes "name the store ..." ("cudal1 serve wrote").
store::Store open_existing_store(const std::string& db, const std::string& written_by);

}  // namespace cudal1::cli
