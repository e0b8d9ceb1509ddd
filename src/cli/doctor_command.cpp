// cudal1 doctor: what an evaluation on this machine needs, checked one line at a time, each ok or
// what to do (docs/evaluation.md, "Checking a machine: cudal1 doctor"). The last check is the
// real thing: a tiny load_inline candidate built, verified and timed by the engine, with a CUDA
// kernel of its own on a GPU, whose kernel trace must show that kernel.
#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/common/sandbox.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/eval/evaluation.hpp"
#include "cudal1/eval/gpu_clock.hpp"
#include "cudal1/eval/local_evaluator.hpp"
#include "cudal1/eval/toolchain.hpp"
#include "option_domains.hpp"
#include "output_format.hpp"

namespace cudal1::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct DoctorArguments {
  std::string device = "auto";
  std::string cache_dir;
  std::string format = "auto";
  bool no_build = false;
};

struct Check {
  std::string name;
  std::string state;  // ok, warn, fail, skip
  std::string detail;
  std::string remedy;  // what to do (warn and fail)
};

// Free space under which builds may fail (a CUDA extension's objects are tens of MB, PyTorch's
// own extension cache more) and under which a user is warned.
constexpr double kFailFreeGiB = 1.0;
constexpr double kWarnFreeGiB = 5.0;

// The tiny task and candidates the build check evaluates: written to a scratch folder, so the
// check needs nothing beside the binary.
constexpr const char* kTask = R"(# cudal1 doctor: a small elementwise task.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)


def get_inputs():
    return [torch.randn(1 << 16)]


def get_init_inputs():
    return []
)";

constexpr const char* kCpuCandidate = R"(# cudal1 doctor: a C++ extension built with load_inline.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

torch::Tensor doctor_relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* out = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = in[i] * 2.0f + 1.0f;
    out[i] = v > 0.0f ? v : 0.0f;
  }
  return y;
}
"""

module = load_inline(name="cudal1_doctor_cpu", cpp_sources=source, functions=["doctor_relu"],
                     extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.doctor_relu(x.contiguous())
)";

constexpr const char* kCudaCandidate = R"(# cudal1 doctor: a CUDA kernel built with load_inline.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void doctor_relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] * 2.0f + 1.0f;
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

torch::Tensor doctor_relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  doctor_relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

module = load_inline(name="cudal1_doctor_cuda", cpp_sources="torch::Tensor doctor_relu(torch::Tensor x);",
                     cuda_sources=cuda_source, functions=["doctor_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module.doctor_relu(x.contiguous())
)";

class Doctor {
 public:
  void add(std::string name, std::string state, std::string detail, std::string remedy = "") {
    checks_.push_back({std::move(name), std::move(state), std::move(detail), std::move(remedy)});
  }
  std::size_t count(const std::string& state) const {
    return static_cast<std::size_t>(std::count_if(
        checks_.begin(), checks_.end(), [&](const Check& c) { return c.state == state; }));
  }
  json to_json(const std::string& device) const {
    json checks = json::array();
    for (const auto& c : checks_) {
      checks.push_back({{"name", c.name},
                        {"state", c.state},
                        {"detail", c.detail},
                        {"remedy", c.remedy.empty() ? json(nullptr) : json(c.remedy)}});
    }
    return {{"device", device},          {"checks", checks},        {"ok", count("ok")},
            {"warnings", count("warn")}, {"failed", count("fail")}, {"skipped", count("skip")}};
  }
  std::string text(const std::string& device) const {
    std::string out = fmt::format("cudal1 doctor: what an evaluation on {} needs\n", device);
    for (const auto& c : checks_) {
      out += fmt::format("  {:<5} {:<13} {}\n", c.state, c.name, c.detail);
      if (!c.remedy.empty()) out += fmt::format("  {:<5} {:<13} -> {}\n", "", "", c.remedy);
    }
    out += fmt::format("cudal1 doctor: {} ok, {} warning{}, {} failed{}\n", count("ok"),
                       count("warn"), count("warn") == 1 ? "" : "s", count("fail"),
                       count("skip") > 0 ? fmt::format(", {} skipped", count("skip")) : "");
    return out;
  }

 private:
  std::vector<Check> checks_;
};

// Details of a check: one line of what a library or the worker said.
constexpr std::size_t kDetail = 200;

void check_cache(Doctor& doctor, const fs::path& cache) {
  std::error_code ec;
  fs::create_directories(cache, ec);
  const fs::path probe = cache / fmt::format(".doctor-{}", ::getpid());
  try {
    write_file_atomic(probe, "ok\n");
    fs::remove(probe, ec);
  } catch (const std::exception& e) {
    doctor.add("cache", "fail", fmt::format("{} cannot be written: {}", cache.string(), e.what()),
               "name a writable folder with --cache-dir or $CUDAL1_CACHE_DIR");
    return;
  }
  struct statvfs fs_info {};
  if (::statvfs(cache.c_str(), &fs_info) != 0) {
    doctor.add("cache", "warn", fmt::format("{}: free space unknown", cache.string()));
    return;
  }
  const double free_gib =
      static_cast<double>(fs_info.f_bavail) * static_cast<double>(fs_info.f_frsize) / (1 << 30);
  const std::string detail = fmt::format("{} ({:.1f} GiB free)", cache.string(), free_gib);
  if (free_gib < kFailFreeGiB) {
    doctor.add("cache", "fail", detail,
               fmt::format("free at least {:.0f} GiB there, or point --cache-dir elsewhere",
                           kWarnFreeGiB));
  } else if (free_gib < kWarnFreeGiB) {
    doctor.add("cache", "warn", detail,
               fmt::format("builds of many candidates want {:.0f} GiB or more", kWarnFreeGiB));
  } else {
    doctor.add("cache", "ok", detail);
  }
}

// The cores evaluations are sized by (--jobs, --max-in-flight): the affinity mask and the
// cgroup's CPU quota, which a container or taskset may set below the machine's CPUs.
void check_cores(Doctor& doctor) {
  const unsigned usable = usable_cores();
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::string detail = fmt::format("{} usable", usable);
  if (online > 0 && static_cast<unsigned long>(online) != usable)
    detail += fmt::format(" of the machine's {} (affinity mask or cgroup CPU quota)", online);
  detail += fmt::format(": by default --jobs {}, and {} evaluations at once", usable, 2 * usable);
  doctor.add("cores", "ok", detail);
}

void check_sandbox(Doctor& doctor) {
  const SandboxSupport& sandbox = SandboxSupport::probe();
  if (sandbox.available()) {
    doctor.add("sandbox", "ok", sandbox.describe());
  } else {
    doctor.add("sandbox", "warn",
               "no sandbox: candidates would run with your view of the machine (--sandbox auto "
               "says so in every verdict; --sandbox on refuses): " +
                   first_line(sandbox.why_unavailable, kDetail),
               "install bubblewrap (apt-get install bubblewrap) and allow user namespaces, or "
               "run as root");
  }
  const CgroupSupport& cgroup = CgroupSupport::probe();
  if (cgroup.available()) {
    doctor.add("cgroup", "ok",
               "memory and process limits per sandbox under " + cgroup.parent.string());
  } else {
    doctor.add(
        "cgroup", "warn",
        "limits fall back to per-process rlimits: " + first_line(cgroup.why_unavailable, kDetail),
        "a cgroup v2 hierarchy with the memory and pids controllers gives limits that "
        "hold for everything a candidate starts");
  }
}

// The probe's report on Python, PyTorch and the compilers; nullopt when PyTorch did not start.
std::optional<Toolchain> check_python(Doctor& doctor, const fs::path& worker,
                                      const fs::path& cache) {
  std::optional<Toolchain> toolchain;
  try {
    toolchain = Toolchain::probe(worker, cache / "doctor-probe.log");
  } catch (const std::exception& e) {
    doctor.add("python", "fail",
               "the worker cannot start PyTorch: " + first_line(e.what(), kDetail),
               "install PyTorch for the Python the worker embeds (Debian: apt-get install "
               "python3-torch), and see " +
                   (cache / "doctor-probe.log").string());
    return std::nullopt;
  }
  const json& info = toolchain->info;
  const json torch_cuda = info.value("torch_cuda", json());
  doctor.add(
      "python", "ok",
      fmt::format("Python {}, torch {} ({})", info.value("python", "?"), info.value("torch", "?"),
                  torch_cuda.is_string() ? "built for CUDA " + torch_cuda.get<std::string>()
                                         : std::string("a CPU build")));
  const json cxx = info.value("cxx", json());
  if (cxx.is_string()) {
    doctor.add("compiler", "ok", cxx.get<std::string>());
  } else {
    doctor.add("compiler", "fail", "no c++ on PATH: C++/CUDA candidates cannot build",
               "install g++ (apt-get install g++)");
  }
  const json headers = info.value("torch_headers", json());
  if (headers.is_array() && !headers.empty()) {
    doctor.add("torch headers", "ok", "torch/extension.h found");
  } else {
    doctor.add("torch headers", "fail",
               "torch/extension.h is missing: load_inline candidates cannot build",
               "install PyTorch's C++ headers (Debian: apt-get install libtorch-dev)");
  }
  return toolchain;
}

void check_gpu(Doctor& doctor, const Toolchain* toolchain) {
  try {
    const std::string version = read_file("/proc/driver/nvidia/version");
    doctor.add("driver", "ok", first_line(version, kDetail));
  } catch (const std::exception&) {
    doctor.add("driver", "fail", "no NVIDIA driver is loaded (/proc/driver/nvidia/version)",
               "install the NVIDIA driver, or evaluate with --device cpu");
  }
  std::string why;
  if (const auto driver = nvml_driver_version(why)) {
    const auto count = visible_gpu_count();
    doctor.add("nvml", "ok",
               fmt::format(
                   "driver {}{}", *driver,
                   count ? fmt::format(", {} GPU{} visible", *count, *count == 1 ? "" : "s") : ""));
  } else {
    doctor.add("nvml", "warn",
               "NVML cannot be used: the SM clock is not checked while timing (" + why + ")",
               "libnvidia-ml.so.1 comes with the driver; make it visible to the loader");
  }
  if (toolchain == nullptr) {
    doctor.add("gpu", "skip", "PyTorch did not start");
    doctor.add("nvcc", "skip", "PyTorch did not start");
  } else {
    const json& info = toolchain->info;
    if (toolchain->cuda_available) {
      doctor.add(
          "gpu", "ok",
          fmt::format("PyTorch sees CUDA (compute capability {})", toolchain->cuda_arch_list()));
    } else {
      doctor.add("gpu", "fail", "PyTorch sees no CUDA device",
                 info.value("torch_cuda", json()).is_string()
                     ? "check the driver and CUDA_VISIBLE_DEVICES"
                     : "this PyTorch is a CPU build: install one built for CUDA");
    }
    const json nvcc = info.value("nvcc", json());
    if (nvcc.is_string() && !nvcc.get<std::string>().empty()) {
      doctor.add("nvcc", "ok", nvcc.get<std::string>());
    } else if (toolchain->cuda_available) {
      doctor.add("nvcc", "fail", "nvcc not found where PyTorch looks (CUDA_HOME)",
                 "install the CUDA toolkit and set CUDA_HOME to it");
    } else {
      doctor.add("nvcc", "skip", "no CUDA device to build for");
    }
  }
  // Hardware counters (ncu) may be for administrators only; cudal1's kernel trace is CUPTI's
  // activity API, which is not.
  try {
    const std::string params = read_file("/proc/driver/nvidia/params");
    const bool admin_only = params.find("RmProfilingAdminOnly: 1") != std::string::npos;
    doctor.add("counters", admin_only && ::geteuid() != 0 ? "warn" : "ok",
               admin_only ? "GPU performance counters are for administrators only (ncu needs "
                            "root); cudal1's kernel trace does not need them"
                          : "GPU performance counters are open to every user",
               admin_only && ::geteuid() != 0
                   ? "profile with ncu as root, or set NVreg_RestrictProfilingToAdminUsers=0"
                   : "");
  } catch (const std::exception&) {
    doctor.add("counters", "skip", "no /proc/driver/nvidia/params");
  }
}

// The real thing: the engine builds, verifies and times the tiny candidate on `device`.
void check_build(Doctor& doctor, const std::string& device, const fs::path& cache) {
  const fs::path dir = make_private_directory(fs::temp_directory_path(), "cudal1-doctor-");
  const bool cuda = device != "cpu";
  write_file_atomic(dir / "task.py", kTask);
  write_file_atomic(dir / "candidate.py", cuda ? kCudaCandidate : kCpuCandidate);
  EngineConfig engine;
  engine.cache_dir = cache;
  EvalRequest request;
  request.task = dir / "task.py";
  request.candidate = dir / "candidate.py";
  request.options.device = device;
  request.options.trials = 1;
  request.options.timing.budget_s = 1;
  const auto start = std::chrono::steady_clock::now();
  Verdict verdict;
  try {
    // Inside the check: the engine refuses a bad CUDAL1_PCH or CUDAL1_CUDA_HEADERS, which is
    // what the check is to report.
    LocalEvaluator evaluator(engine);
    verdict = evaluator.evaluate(request);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(dir, ec);
    doctor.add("build", "fail", "the evaluation could not run: " + first_line(e.what(), kDetail),
               "fix the checks above first");
    return;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const fs::path kept = cache / fmt::format("doctor-verdict-{}.json", cuda ? "cuda" : "cpu");
  write_file_atomic(kept, verdict.to_json().dump(2, ' ', false, json::error_handler_t::replace));
  const bool cached = verdict.details.value("build", json::object()).value("cached", false);
  const std::string kind = cuda ? "a CUDA kernel" : "a C++ extension";
  if (verdict.status != Status::kOk) {
    doctor.add("build", "fail",
               fmt::format("{} built with load_inline: {}: {}", kind, to_string(verdict.status),
                           first_line(verdict.error, kDetail)),
               "the verdict with its build log: " + kept.string());
    return;
  }
  doctor.add("build", "ok",
             fmt::format("{} built with load_inline, verified and timed on {} in {:.0f} s{}", kind,
                         device, seconds, cached ? " (built earlier with this toolchain)" : ""));
  if (!cuda) return;
  const json activity =
      verdict.details.value("timing", json::object()).value("activity", json::object());
  const int own = activity.is_object() && activity.contains("candidate")
                      ? activity["candidate"].value("own_kernels", 0)
                      : -1;
  if (own > 0) {
    doctor.add("kernel trace", "ok", "CUPTI saw the candidate's own kernel run");
  } else {
    doctor.add("kernel trace", "fail",
               own == 0 ? "CUPTI did not see the candidate's own kernel run"
                        : "no kernel trace was recorded (CUPTI unavailable?)",
               "the verdict: " + kept.string());
  }
}

int run_doctor(const DoctorArguments& args) {
  const fs::path cache = args.cache_dir.empty() ? default_cache_dir() : fs::path(args.cache_dir);
  Doctor doctor;
  const fs::path worker = default_worker_path();
  std::error_code ec;
  if (fs::is_regular_file(worker, ec) && ::access(worker.c_str(), X_OK) == 0) {
    doctor.add("worker", "ok", worker.string());
  } else {
    doctor.add("worker", "fail", worker.string() + " is missing or not executable",
               "build it (make demo builds cudal1 and cudal1-worker side by side), or set "
               "CUDAL1_WORKER");
  }
  check_cache(doctor, cache);
  check_cores(doctor);
  check_sandbox(doctor);
  const auto toolchain =
      doctor.count("fail") == 0 ? check_python(doctor, worker, cache) : std::nullopt;
  std::string device = args.device;
  if (device == "auto") device = toolchain && toolchain->cuda_available ? "cuda" : "cpu";
  if (device != "cpu") check_gpu(doctor, toolchain ? &*toolchain : nullptr);
  if (args.no_build) {
    doctor.add("build", "skip", "--no-build");
  } else if (doctor.count("fail") > 0) {
    doctor.add("build", "skip", "fix the failed checks first");
  } else {
    if (text_output(args.format))
      std::cerr << "cudal1 doctor: building and evaluating a tiny "
                   "candidate on "
                << device << "..." << std::endl;
    check_build(doctor, device, cache);
  }
  if (text_output(args.format)) {
    std::cout << doctor.text(device) << std::flush;
  } else {
    std::cout << doctor.to_json(device).dump(2) << std::endl;
  }
  return doctor.count("fail") > 0 ? kExitInternal : kExitOk;
}

}  // namespace

Command add_doctor_command(CLI::App& app) {
  auto args = std::make_shared<DoctorArguments>();
  CLI::App* doctor = app.add_subcommand(
      "doctor", "Check what an evaluation on this machine needs, each line ok or what to do");
  doctor
      ->add_option("--device", args->device,
                   "auto (cuda when PyTorch sees a GPU), cpu, cuda or cuda:N")
      ->check(CLI::Validator(
          [](const std::string& value) {
            try {
              parse_device_request(value, false);
              return std::string();
            } catch (const InputError& error) {
              return std::string(error.what());
            }
          },
          "DEVICE"))
      ->capture_default_str();
  doctor
      ->add_option("--cache-dir", args->cache_dir,
                   "build cache to check (default: $CUDAL1_CACHE_DIR or ~/.cache/cudal1)")
      ->check(output_folder());
  doctor->add_flag("--no-build", args->no_build,
                   "skip the last check (building and evaluating a tiny candidate)");
  add_format_option(*doctor, args->format);
  return [args] { return run_doctor(*args); };
}

}  // namespace cudal1::cli
