#include "cudal1/eval/toolchain.hpp"

#include <fmt/format.h>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/sha256.hpp"

namespace cudal1 {
namespace {

// Importing PyTorch and asking nvcc for its version; generous for a cold file-system cache.
constexpr double kProbeTimeoutSeconds = 180;

}  // namespace

Toolchain Toolchain::probe(const std::filesystem::path& worker,
                           const std::filesystem::path& log_file) {
  ProcessSpec spec;
  spec.argv = {worker.string(), "probe"};
  spec.log_file = log_file;
  Toolchain toolchain;
  try {
    toolchain.info = nlohmann::json::parse(run_and_capture(spec, kProbeTimeoutSeconds));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("the worker ({}) could not start PyTorch: {}\n{}",
                                         worker.string(), e.what(), trim_log_file(log_file)));
  }
  toolchain.fingerprint = sha256_hex(toolchain.info.dump());
  toolchain.cuda_available = toolchain.info.value("cuda_available", false);
  return toolchain;
}

std::string Toolchain::cuda_arch_list() const {
  std::string out;
  for (const auto& capability : info.value("capabilities", std::vector<std::string>{})) {
    if (!out.empty()) out += ';';
    out += capability;
  }
  return out;
}

}  // namespace cudal1
