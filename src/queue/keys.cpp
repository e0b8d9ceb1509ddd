#include "cudal1/queue/keys.hpp"

#include <fmt/format.h>

namespace cudal1::queue::keys {

std::string jobs(std::string_view kind) {
  return fmt::format("cudal1:jobs:{}", kind);
}

std::string build_kind(std::string_view build_toolchain_id) {
  return fmt::format("{}{}", kBuildPrefix, build_toolchain_id);
}

bool is_build_kind(std::string_view kind) {
  return kind.rfind(kBuildPrefix, 0) == 0;
}

std::string artifact(std::string_view digest) {
  return fmt::format("cudal1:artifact:{}", digest);
}

std::string job(std::string_view job_id) {
  return fmt::format("cudal1:job:{}", job_id);
}

std::string done(std::string_view job_id) {
  return fmt::format("cudal1:done:{}", job_id);
}

std::string results(std::string_view submitter) {
  return fmt::format("cudal1:results:{}", submitter);
}

std::string worker(std::string_view name) {
  return fmt::format("cudal1:worker:{}", name);
}

std::string finished_in_minute(long long unix_minute) {
  return fmt::format("cudal1:finished:{}", unix_minute);
}

}  // namespace cudal1::queue::keys
