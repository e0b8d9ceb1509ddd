#include "guarded_command.hpp"

#include <iostream>

#include "commands.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/search/optimizer.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::cli {

int exit_after_failure(const std::string& command, const std::string& db) {
  try {
    throw;
  } catch (const InputError& e) {
    std::cerr << command << ": " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const store::StoreError& e) {
    std::cerr << command << ": " << e.what() << std::endl;
    return kExitBadInput;
  } catch (const search::LlmAbort& e) {
    std::cerr << command << ": " << e.what();
    if (!db.empty()) {
      std::cerr << "\nEverything received so far is in " << db
                << "; fix the problem and continue with: " << command << " --db " << db
                << " --resume";
    }
    std::cerr << std::endl;
    return kExitLlmFailure;
  } catch (const std::exception& e) {
    std::cerr << command << ": internal error: " << e.what() << std::endl;
    return kExitInternal;
  }
}

}  // namespace cudal1::cli
