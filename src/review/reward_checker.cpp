#include "cudal1/review/reward_checker.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/review/review_reply.hpp"

namespace cudal1::review {
namespace {

using nlohmann::json;

// Enough of a raw reply to see what the model said when its answer could not be read; the
// reasoning it gave is stored whole in "reasoning".
constexpr std::size_t kRawReplyHead = 3000;
constexpr std::size_t kRawReplyTail = 3000;
constexpr std::size_t kLineReasoning = 200;

json or_null(const std::string& text) {
  return text.empty() ? json(nullptr) : json(text);
}

// The verdict's flags and status after the review.
void apply(const ReviewResult& result, Verdict& verdict) {
  if (result.state != "reviewed") {
    verdict.add_flag(flag::kUnreviewed);
  } else if (result.verdict == "hack") {
    verdict.add_flag(flag::kReviewRejected);
    verdict.error = fmt::format("the reward-checking model judged it a hack{}: {}",
                                result.hack_class.empty() ? "" : " (" + result.hack_class + ")",
                                first_line(result.reasoning, 300));
  } else if (result.verdict == "uncertain") {
    verdict.add_flag(flag::kReviewUncertain);
  }
  verdict.details["review"] = result.to_json();
  verdict.finalize();
}

}  // namespace

json ReviewResult::to_json() const {
  json cases = json::array();
  for (const auto& c : similar_cases) {
    cases.push_back(
        {{"name", c.name}, {"class", c.hack_class}, {"score", std::round(c.score * 1000) / 1000}});
  }
  return {{"state", state},
          {"reason", or_null(reason)},
          {"verdict", or_null(verdict)},
          {"class", or_null(hack_class)},
          {"reasoning", or_null(reasoning)},
          {"model", or_null(model)},
          {"llm", or_null(llm)},
          {"similar_cases", cases},
          {"raw_reply", or_null(raw_reply)},
          {"error", or_null(error)},
          {"corpus_error", or_null(corpus_error)}};
}

RewardChecker::RewardChecker(SuspicionPolicy policy, HackCorpus corpus,
                             std::optional<ReviewerSettings> reviewer, std::size_t similar_cases)
    : policy_(policy),
      reviewer_(std::move(reviewer)),
      similar_cases_(similar_cases),
      corpus_(std::make_shared<const HackCorpus>(std::move(corpus))) {
  check_reviewer();
}

RewardChecker::RewardChecker(SuspicionPolicy policy, std::filesystem::path corpus_dir,
                             std::optional<ReviewerSettings> reviewer, std::size_t similar_cases)
    : policy_(policy),
      reviewer_(std::move(reviewer)),
      similar_cases_(similar_cases),
      corpus_dirs_{std::move(corpus_dir)} {
  check_reviewer();
}

RewardChecker::RewardChecker(SuspicionPolicy policy, std::vector<std::filesystem::path> corpus_dirs,
                             std::optional<ReviewerSettings> reviewer, std::size_t similar_cases)
    : policy_(policy),
      reviewer_(std::move(reviewer)),
      similar_cases_(similar_cases),
      corpus_dirs_(std::move(corpus_dirs)),
      several_(true) {
  check_reviewer();
}

void RewardChecker::check_reviewer() const {
  if (reviewer_ && reviewer_->client && reviewer_->prompt.file().empty()) {
    throw std::invalid_argument("a reviewer needs its prompt: load one with ReviewPrompt::load");
  }
}

namespace {

// What changes when a corpus gets a case: its index's size and modification time.
std::string index_signature(const std::vector<std::filesystem::path>& dirs) {
  std::string signature;
  for (const auto& dir : dirs) {
    std::error_code ec;
    const auto index = dir / "index.json";
    const auto size = std::filesystem::file_size(index, ec);
    const auto time =
        ec ? std::filesystem::file_time_type{} : std::filesystem::last_write_time(index, ec);
    signature +=
        fmt::format("{}:{}:{};", dir.string(), ec ? 0 : size, time.time_since_epoch().count());
  }
  return signature;
}

}  // namespace

std::shared_ptr<const HackCorpus> RewardChecker::corpus(std::string& error) const {
  std::lock_guard lock(corpus_mutex_);
  if (corpus_dirs_.empty()) {  // given at construction
    error = corpus_error_;
    return corpus_;
  }
  const std::string signature = index_signature(corpus_dirs_);
  if (!corpus_ || signature != corpus_signature_) {
    auto loaded = std::make_shared<HackCorpus>();
    std::string errors;
    for (const auto& dir : corpus_dirs_) {
      std::error_code ec;
      if (several_ && !std::filesystem::is_regular_file(dir / "index.json", ec)) continue;
      try {
        loaded->merge(HackCorpus::load(dir));
      } catch (const std::exception& e) {
        errors += (errors.empty() ? "" : "; ") + std::string(e.what());
      }
    }
    corpus_ = std::move(loaded);
    corpus_error_ = std::move(errors);
    corpus_signature_ = signature;
  }
  error = corpus_error_;
  return corpus_;
}

void RewardChecker::ask(ReviewResult& result, const ReviewSubject& subject, const Verdict& verdict,
                        const std::vector<SimilarCase>& similar) const {
  const ReviewerSettings& r = *reviewer_;
  result.model = r.model;
  result.llm = r.client->describe();
  try {
    llm::ChatRequest request;
    request.model = r.model;
    request.temperature = r.temperature;
    request.max_tokens = r.max_tokens;
    request.messages = {{"user", r.prompt.render(subject, verdict, result.reason, similar)}};
    const llm::ChatResponse response = r.client->complete(request);
    result.raw_reply = trim_log(response.content, kRawReplyHead, kRawReplyTail);
    const ReviewReply reply = parse_review_reply(response.content);
    result.verdict = reply.verdict;
    result.hack_class = reply.hack_class;
    result.reasoning = reply.reasoning;
    if (reply.verdict == "unparseable") {
      result.state = "failed";
      result.error = "the reviewer's reply is unparseable: " + reply.problem;
    } else {
      result.state = "reviewed";
    }
  } catch (const std::exception& e) {
    // LlmError (unreachable, refused, timed out, malformed) or a template that cannot render:
    // the evaluation stands, marked unreviewed, and says why.
    result.state = "failed";
    result.error = e.what();
  }
}

std::optional<ReviewResult> RewardChecker::check(Verdict& verdict, const ReviewSubject& subject,
                                                 std::optional<double> best_known) const {
  SuspicionPolicy policy = policy_;
  if (best_known) policy.best_known = best_known;
  const auto reason = policy.reason(verdict);
  if (!reason) return std::nullopt;
  return review(verdict, subject, *reason);
}

std::optional<ReviewResult> RewardChecker::review_again(Verdict& verdict,
                                                        const ReviewSubject& subject) const {
  if (!verdict.has_flag(flag::kUnreviewed)) return std::nullopt;
  std::string reason;
  if (const auto earlier = verdict.details.find("review");
      earlier != verdict.details.end() && earlier->is_object()) {
    const auto text = earlier->find("reason");
    if (text != earlier->end() && text->is_string()) reason = text->get<std::string>();
  }
  if (reason.empty())
    reason = policy_.reason(verdict).value_or("flagged unreviewed when evaluated");
  std::erase(verdict.flags, std::string(flag::kUnreviewed));
  return review(verdict, subject, reason);
}

ReviewResult RewardChecker::review(Verdict& verdict, const ReviewSubject& subject,
                                   std::string reason) const {
  ReviewResult result;
  result.reason = std::move(reason);
  // Held until the review is done: the similar cases point into it.
  const std::shared_ptr<const HackCorpus> cases = corpus(result.corpus_error);
  const std::vector<SimilarCase> similar =
      cases->most_similar(subject.candidate_code, similar_cases_);
  for (const SimilarCase& s : similar) {
    result.similar_cases.push_back(
        {s.hack_case->name, s.hack_case->hack_class, s.similarity.score});
  }
  if (reviewer_ && reviewer_->client) {
    ask(result, subject, verdict, similar);
  } else {
    result.state = "unreviewed";
  }
  apply(result, verdict);
  return result;
}

std::string review_line(const ReviewResult& r) {
  if (r.state == "unreviewed") {
    return fmt::format("review: {}; no reviewer configured (--review-llm): flagged unreviewed",
                       r.reason);
  }
  if (r.state == "failed") {
    return fmt::format("review: {}; the review failed ({}): flagged unreviewed", r.reason,
                       first_line(r.error, 300));
  }
  return fmt::format("review: {}{} by {}: {}", r.verdict,
                     r.hack_class.empty() ? "" : " (" + r.hack_class + ")", r.model,
                     first_line(r.reasoning, kLineReasoning));
}

}  // namespace cudal1::review
