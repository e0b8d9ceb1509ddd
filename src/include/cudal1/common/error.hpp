// Error kinds that cross layer boundaries.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace cudal1 {

// The user's input cannot be evaluated (missing file, syntax error, no Model, ...). The message
// names the file and the problem; the CLI exits with code 2.
class InputError : public std::runtime_error {
 public:
  // Which input is unusable: an optimiser treats a bad candidate as that candidate's verdict and
  // a bad task as the end of the run.
  enum class Subject { kOther, kTask, kCandidate };
  explicit InputError(const std::string& message, Subject subject = Subject::kOther)
      : std::runtime_error(message), subject_(subject) {}
  Subject subject() const { return subject_; }

 private:
  Subject subject_;
};

// The subject for a file role ("task", "candidate").
inline InputError::Subject subject_of_role(std::string_view role) {
  if (role == "task") return InputError::Subject::kTask;
  if (role == "candidate") return InputError::Subject::kCandidate;
  return InputError::Subject::kOther;
}

}  // namespace cudal1
