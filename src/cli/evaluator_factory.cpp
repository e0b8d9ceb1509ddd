#include "evaluator_factory.hpp"

#include "cudal1/common/error.hpp"
#include "cudal1/eval/local_evaluator.hpp"

namespace cudal1::cli {

std::unique_ptr<Evaluator> make_evaluator(const EvaluatorSettings& settings) {
  if (!settings.queue.empty()) {
    throw InputError(
        "--queue: this cudal1 cannot evaluate on a queue yet; leave --queue out to evaluate on "
        "this machine");
  }
  return std::make_unique<LocalEvaluator>(settings.engine);
}

}  // namespace cudal1::cli
