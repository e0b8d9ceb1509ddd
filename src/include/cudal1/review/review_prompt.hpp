// The prompt of the reward-checking model, rendered from an editable template (prompts/review.md,
// the same Mustache subset as the optimiser's prompts; docs/review.md lists its names).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cudal1/eval/verdict.hpp"
#include "cudal1/review/hack_corpus.hpp"

namespace cudal1::review {

// What a review looks at besides the verdict.
struct ReviewSubject {
  std::string task_name;
  std::string task_code;
  std::string candidate_code;
};

class ReviewPrompt {
 public:
  // Reads and test-renders the template; throws InputError naming the file when it is missing
  // or broken.
  static ReviewPrompt load(const std::filesystem::path& file);
  // $CUDAL1_PROMPTS/review.md when set, else prompts/review.md above the binary's directory,
  // else the source tree's.
  static std::filesystem::path default_file();

  std::string render(const ReviewSubject& subject, const Verdict& verdict,
                     const std::string& reason, const std::vector<SimilarCase>& similar) const;
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::string template_;
};

// The measurement as a few lines of text: speedup and interval, median times, samples, kernel
// time and counts where CUPTI recorded them, device, noise.
std::string describe_measurement(const Verdict& verdict);

}  // namespace cudal1::review
