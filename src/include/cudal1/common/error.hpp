// Error kinds that cross layer boundaries.
#pragma once

#include <stdexcept>

namespace cudal1 {

// The user's input cannot be evaluated (missing file, syntax error, no Model, ...). The message
// names the file and the problem; the CLI exits with code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace cudal1
