// The reward-checking model (CUDA-L1's defence against reward hacking beyond the measurement
// protocol): a verdict that passed every automatic check but looks too good (SuspicionPolicy) is
// shown to an LLM together with the most similar known hack cases; the model reasons and
// answers hack, legitimate or uncertain. The answer is stored in the verdict as
// details["review"], and
//   - "hack" adds the reject flag review_rejected (status rejected, reward 0),
//   - "uncertain" adds the info flag review_uncertain,
//   - no reviewer configured, a failed request or an unparseable reply add the info flag
//     unreviewed: a suspicious result is never accepted silently.
// Verdicts that are not suspicious are left untouched.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/eval/verdict.hpp"
#include "cudal1/llm/client.hpp"
#include "cudal1/review/hack_corpus.hpp"
#include "cudal1/review/review_prompt.hpp"
#include "cudal1/review/suspicion_policy.hpp"

namespace cudal1::review {

struct ReviewerSettings {
  std::shared_ptr<llm::LlmClient>
      client;  // thread-safe; shared with the optimiser when it is its LLM
  std::string model;
  ReviewPrompt prompt;
  // A review is a judgement, not a sample: the most likely answer is the wanted one.
  double temperature = 0.0;
  std::optional<int> max_tokens;
};

struct SimilarCaseSummary {
  std::string name;
  std::string hack_class;
  double score = 0;
};

struct ReviewResult {
  std::string state;       // "reviewed", "unreviewed" (no reviewer), "failed" (error, unparseable)
  std::string reason;      // why the verdict was reviewed
  std::string verdict;     // "hack", "legitimate", "uncertain", "unparseable"; "" without a reply
  std::string hack_class;  // the reviewer's class for a hack
  std::string reasoning;
  std::string model;
  std::string llm;  // the client ("http://host/v1", "cmd:...")
  std::vector<SimilarCaseSummary> similar_cases;
  std::string raw_reply;     // trimmed
  std::string error;         // why the review failed
  std::string corpus_error;  // the hack corpus could not be read (the review went on without it)

  // {state, reason, verdict, class, reasoning, model, llm, similar_cases: [{name, class, score}],
  //  raw_reply, error, corpus_error}; absent values are null.
  nlohmann::json to_json() const;
};

class RewardChecker {
 public:
  // `reviewer` absent: suspicious verdicts are flagged unreviewed (with the similar cases).
  // Throws std::invalid_argument for a reviewer with a client but no loaded prompt.
  RewardChecker(SuspicionPolicy policy, HackCorpus corpus, std::optional<ReviewerSettings> reviewer,
                std::size_t similar_cases = 3);
  // The corpus is read from `corpus_dir` at the first suspicious verdict; when it cannot be read
  // the review goes on without similar cases and says why (corpus_error).
  RewardChecker(SuspicionPolicy policy, std::filesystem::path corpus_dir,
                std::optional<ReviewerSettings> reviewer, std::size_t similar_cases = 3);
  // Several corpus folders read as one (cudal1 serve: the shipped corpus and the one it adds
  // rejected completions to). A folder without an index yet is left out silently; the corpus is
  // read again when an index changes, so cases added meanwhile are shown to the next review.
  RewardChecker(SuspicionPolicy policy, std::vector<std::filesystem::path> corpus_dirs,
                std::optional<ReviewerSettings> reviewer, std::size_t similar_cases = 3);

  // Reviews `verdict` when the policy (with `best_known` when given) finds it suspicious:
  // records details["review"], adds the flags above and re-applies the reject set. Returns the
  // review, or nullopt for a verdict that is not suspicious. Thread-safe.
  std::optional<ReviewResult> check(Verdict& verdict, const ReviewSubject& subject,
                                    std::optional<double> best_known = std::nullopt) const;

  // A verdict flagged unreviewed when it was evaluated (no reviewer then, or the review failed;
  // cudal1 review): asked now whatever the policy says today, since it was suspicious then. The
  // unreviewed flag goes, details["review"] is replaced and the reject set re-applied. Returns
  // nullopt, changing nothing, for a verdict without the unreviewed flag.
  std::optional<ReviewResult> review_again(Verdict& verdict, const ReviewSubject& subject) const;

  const SuspicionPolicy& policy() const { return policy_; }
  bool has_reviewer() const { return reviewer_.has_value(); }

 private:
  void check_reviewer() const;
  ReviewResult review(Verdict& verdict, const ReviewSubject& subject, std::string reason) const;
  // The corpus as it is now (read again when an index changed), and why it could not be read.
  std::shared_ptr<const HackCorpus> corpus(std::string& error) const;
  void ask(ReviewResult& result, const ReviewSubject& subject, const Verdict& verdict,
           const std::vector<SimilarCase>& similar) const;

  SuspicionPolicy policy_;
  std::optional<ReviewerSettings> reviewer_;
  std::size_t similar_cases_;
  std::vector<std::filesystem::path> corpus_dirs_;  // empty: a corpus given at construction
  bool several_ = false;                            // folders without an index are skipped
  mutable std::mutex corpus_mutex_;
  mutable std::shared_ptr<const HackCorpus> corpus_;
  mutable std::string corpus_error_;
  mutable std::string corpus_signature_;  // the index files' sizes and times when read
};

// One line for people, e.g. "review: hack (lazy_output) by MODEL: the output is ...".
std::string review_line(const ReviewResult& result);

}  // namespace cudal1::review
