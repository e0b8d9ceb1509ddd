#include "cudal1/eval/precompiled_headers.hpp"

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>

#include "cudal1/common/error.hpp"
#include "cudal1/common/file_lock.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/worker/protocol.hpp"

namespace cudal1 {
namespace {

namespace fs = std::filesystem;

// Making the file: about 30 CPU-s on one core; generous for a loaded host.
constexpr double kMakeTimeoutSeconds = 900;
// Builds a process compiles before `auto` makes the file: a lone evaluation does not pay for it.
constexpr int kAutoAfterBuilds = 2;

std::string failure_text(const fs::path& folder) {
  try {
    return nlohmann::json::parse(read_file(folder / "failed.json")).value("why", "unknown");
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

PchPolicy pch_policy_from(const char* value) {
  const std::string text = value == nullptr ? "" : value;
  if (text.empty() || text == "auto") return PchPolicy::kAuto;
  if (text == "on") return PchPolicy::kOn;
  if (text == "off") return PchPolicy::kOff;
  throw InputError(fmt::format("CUDAL1_PCH is '{}'; it takes auto (the default), on or off", text));
}

CudaHeaders cuda_headers_from(const char* value) {
  const std::string text = value == nullptr ? "" : value;
  if (text.empty() || text == "full") return CudaHeaders::kFull;
  if (text == "light") return CudaHeaders::kLight;
  throw InputError(
      fmt::format("CUDAL1_CUDA_HEADERS is '{}'; it takes full (the default) or light", text));
}

const char* pch_policy_name(PchPolicy policy) {
  switch (policy) {
    case PchPolicy::kOn:
      return "on";
    case PchPolicy::kOff:
      return "off";
    case PchPolicy::kAuto:
      break;
  }
  return "auto";
}

PrecompiledHeaders::PrecompiledHeaders(fs::path root, fs::path worker, PchPolicy policy)
    : root_(std::move(root)), worker_(std::move(worker)), policy_(policy) {}

PrecompiledHeaders::~PrecompiledHeaders() {
  stopping_ = true;
  if (maker_.joinable()) maker_.join();
}

std::string PrecompiledHeaders::folder_name(const std::string& toolchain_fingerprint) const {
  return sha256_hex("cudal1-pch-v1|" + toolchain_fingerprint).substr(0, 16);
}

fs::path PrecompiledHeaders::folder(const std::string& toolchain_fingerprint) const {
  return root_ / folder_name(toolchain_fingerprint);
}

bool PrecompiledHeaders::ready(const std::string& toolchain_fingerprint) const {
  std::error_code ec;
  const fs::path dir = folder(toolchain_fingerprint);
  return fs::exists(dir / "ready.json", ec) && fs::exists(dir / "torch" / "extension.h.gch", ec);
}

nlohmann::json PrecompiledHeaders::before_build(const std::string& toolchain_fingerprint) {
  std::unique_lock<std::mutex> lock(mutex_);
  nlohmann::json out = {{"policy", pch_policy_name(policy_)}};
  ++builds_;
  const fs::path dir = folder(toolchain_fingerprint);
  const bool wanted =
      policy_ == PchPolicy::kOn || (policy_ == PchPolicy::kAuto && builds_ >= kAutoAfterBuilds);
  // Tried before and failed: not again until failed.json is removed.
  if (!ready(toolchain_fingerprint) && wanted && !started_ && failure_text(dir).empty()) {
    started_ = true;
    {
      if (policy_ == PchPolicy::kOn) {
        make(toolchain_fingerprint);  // every build of the process waits for it
      } else {
        maker_ = std::thread([this, toolchain_fingerprint] { make(toolchain_fingerprint); });
      }
    }
  }
  out["ready"] = ready(toolchain_fingerprint);
  if (out["ready"].get<bool>()) {
    try {  // the variants there (by optimisation level), as the maker recorded them
      nlohmann::json variants = nlohmann::json::array();
      const auto made = nlohmann::json::parse(read_file(dir / "ready.json"));
      const nlohmann::json recorded = made.value("variants", nlohmann::json::object());
      for (const auto& [name, _] : recorded.items()) variants.push_back(name);
      out["variants"] = variants;
    } catch (const std::exception&) {
      // Being rewritten as a variant is added: the next build says.
    }
  } else {
    if (const std::string why = failure_text(dir); !why.empty())
      out["failed"] = first_line(why, 400);
  }
  return out;
}

void PrecompiledHeaders::make(const std::string& toolchain_fingerprint) {
  const fs::path dir = folder(toolchain_fingerprint);
  try {
    fs::create_directories(dir);
    // One maker per toolchain on the host; `on` waits for another's, `auto` leaves it to it.
    std::optional<FileLock> held = FileLock::try_acquire(dir / "make.lock");
    if (!held) {
      if (policy_ != PchPolicy::kOn) return;
      held = FileLock::acquire(dir / "make.lock");
    }
    if (ready(toolchain_fingerprint)) return;
    ProcessSpec spec;
    spec.argv = {worker_.string(), worker_protocol::mode::kPrecompiledHeader, dir.string()};
    spec.log_file = dir / "make.log";
    spec.nice = 10;  // below the timing workers, as builds are
    const auto child = ChildProcess::spawn(spec);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(kMakeTimeoutSeconds);
    std::optional<ExitStatus> status;
    for (;;) {
      status = child->poll_exit();
      if (status) break;
      if (stopping_) {
        child->kill_group();  // the process ends first; the partial file goes with the next try
        return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        child->kill_group();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (status && !status->signaled && status->code == 0 && ready(toolchain_fingerprint)) return;
    const std::string why = status ? fmt::format("the maker ended with {}: {}", status->describe(),
                                                 trim_log_file(dir / "make.log", 300, 1200))
                                   : fmt::format("the maker ran past {} s", kMakeTimeoutSeconds);
    write_file_atomic(dir / "failed.json", nlohmann::json{{"why", why}}.dump(2) + "\n");
  } catch (const std::exception& e) {
    try {
      write_file_atomic(dir / "failed.json",
                        nlohmann::json{{"why", std::string(e.what())}}.dump(2) + "\n");
    } catch (const std::exception&) {
      // A cache folder that cannot be written: no file, and builds parse the header.
    }
  }
}

}  // namespace cudal1
