// What the timing is corrected by or checked against: the calibration of the two workers'
// offsets (the task's model timed in both processes), the device's memory bandwidth and matmul
// throughput, cached per device, and the reference's arithmetic held against them.
#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <fstream>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/worker/protocol.hpp"
#include "evaluation_internal.hpp"

namespace cudal1 {

namespace proto = worker_protocol;

bool Evaluation::wants_calibration() const {
  if (options_.timing.rounds > 1) return false;  // rounds average the offsets instead
  return options_.timing.calibration == "on" ||
         (options_.timing.calibration == "auto" && device_ != "cpu");
}

void Evaluation::calibrate(StartedWorker& reference, StartedWorker& candidate) {
  nlohmann::json& record = verdict_.details["calibration"];
  record = nlohmann::json::object();
  const nlohmann::json timer =
      reference.load_reply.value(proto::reply::kTimer, nlohmann::json::object());
  const std::string device_id = timer.value(proto::timer::kUuid, device_);
  // Inputs of its own: the timing phase's pool stays unseen until the timing phase.
  const std::uint64_t seed = seeds_.timing ^ 0xca1b7a7e5eedULL;
  TimingConfig config = options_.timing;
  config.budget_s = std::min(1.0, config.budget_s);
  // Tighter than the timing phase's target: its noise adds to the speedup's.
  config.noise.max_noise = 0.5 * config.noise.max_noise;
  config.noise.min_time_s = 0.1;
  config.min_warmup_s = 0.02;
  config.max_warmup_wall_s = 0.1;
  config.spot_check_every = 0;  // the same trusted model on both sides
  config.unseen_pairs = 0;
  config.rounds = 1;
  const auto deadline = after(options_.limits.correctness_s);
  // Under the shared hold, as the trials' device work (nothing here is timed), taken here: the
  // candidate's worker has no gate before the candidate loads.
  SharedDeviceHolds holds(
      [&] {
        report("waiting for the device (calibration's first calls)");
        return lock_device(shared_.config.lock_dir, device_id, DeviceUse::kShared);
      },
      nullptr, phases_);
  try {
    report("calibration: warm calls of the task's model in the candidate's worker");
    holds.take();
    const double call_ms = call_as(*candidate.client, Side::kCandidate,
                                   {{proto::request::kOp, proto::op::kFirstCall},
                                    {proto::request::kSeed, seed},
                                    {proto::request::kCalls, 5}},
                                   deadline)
                               .header.value(proto::reply::kCallMs, 0.0);
    holds.give_back();
    record["call_ms"] = call_ms;
    if (options_.timing.calibration != "on" && !(call_ms < config.calibrate_below_ms)) {
      record["skipped"] = fmt::format(
          "a warm call of the task's model takes {:.3f} ms; calibrated under {} ms, where a "
          "process's offset is a visible part of the time",
          call_ms, config.calibrate_below_ms);
      return;
    }
    // The reference's worker calls a copy of the task's model, never the one its trials and
    // timing call (a model with state must not run ahead of the candidate's).
    holds.take();  // the copy is built on the device
    call_as(*reference.client, Side::kReference,
            {{proto::request::kOp, proto::op::kCalibrationModel}, {proto::request::kUse, true}},
            deadline);
    holds.give_back();
    // ... and takes its own back however the calibration ends (after the exclusive hold).
    struct PutBack {
      WorkerClient* reference;
      Clock::time_point deadline;
      ~PutBack() {
        try {
          call_as(
              *reference, Side::kReference,
              {{proto::request::kOp, proto::op::kCalibrationModel}, {proto::request::kUse, false}},
              deadline);
        } catch (...) {  // a reference that fails here fails its next request too
        }
      }
    } put_back{reference.client.get(), deadline};
    call_both_on_device(*candidate.client, *reference.client, prepare_timing_request(config, seed),
                        holds, deadline);
    report("waiting for the device (calibration)");
    const ExclusiveDeviceHold hold(shared_.config.lock_dir, device_id, phases_,
                                   "device_wait_calibration_s", "device_held_calibration");
    std::string why;
    const auto clock = GpuClock::open(device_id, why);
    TimingOutcome outcome = measure_speedup(
        *reference.client, *candidate.client, config, seed, seeds_.schedule ^ 0xca1bULL,
        clock.get(), [this](const TimingProgress& p, double ratio) {
          report(fmt::format("calibration: {} samples, ratio {:.3f}, noise {:.2f}%", p.pairs, ratio,
                             100 * p.relative_noise));
        });
    // The reference's time over the same model's in the candidate's process.
    record["ratio"] = outcome.speedup;
    record["ratio_ci"] = {outcome.ci.low, outcome.ci.high};
    record["converged"] = outcome.converged;
    record["pairs"] = outcome.reference_ms.size();
    record["mode"] = outcome.details.value("mode", "");
    record["reference_ms"] = {{"reference_worker", outcome.reference_median_ms},
                              {"candidate_worker", outcome.candidate_median_ms}};
    for (const char* key : {"warmup_s", "sampling_s", "elapsed_s", "stop", "sample_steps_ms"}) {
      if (outcome.details.contains(key)) record[key] = outcome.details[key];
    }
    if (outcome.speedup > 0 && std::isfinite(outcome.speedup)) calibration_ = std::move(outcome);
  } catch (const SideFailure& e) {
    if (e.side() == Side::kReference) throw;
    record["error"] = first_line(e.what(), kWholeLine);
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    record["error"] = first_line(e.what(), kWholeLine);
  }
}

void Evaluation::apply_calibration(TimingOutcome& timing) {
  if (!calibration_) return;
  nlohmann::json& record = verdict_.details["calibration"];
  const TimingOutcome& cal = *calibration_;
  const std::string mode = timing.details.value("mode", "");
  if (cal.details.value("mode", "") != mode) {
    record["applied"] = false;
    record["why_not"] = fmt::format("calibrated on the {} clock, timed on the {} clock",
                                    cal.details.value("mode", ""), mode);
    return;
  }
  // speedup = (reference's time / candidate's time) / (reference's time / the task's model's
  // time in the candidate's process): each process's offset cancels. The interval joins both
  // relative half-widths (log scale) in quadrature.
  const double raw = timing.speedup;
  const double ratio = cal.speedup;
  const auto log_width = [](double a, double b) { return a > 0 && b > 0 ? std::log(a / b) : 0.0; };
  const double down = std::hypot(log_width(raw, timing.ci.low), log_width(cal.ci.high, ratio));
  const double up = std::hypot(log_width(timing.ci.high, raw), log_width(ratio, cal.ci.low));
  timing.details["uncalibrated_speedup"] = raw;
  timing.details["uncalibrated_speedup_ci"] = {timing.ci.low, timing.ci.high};
  timing.speedup = raw / ratio;
  timing.ci = {timing.speedup * std::exp(-down), timing.speedup * std::exp(up)};
  timing.relative_noise = relative_half_width(timing.ci, timing.speedup);
  timing.converged = timing.converged && cal.converged;
  timing.details["relative_noise"] = timing.relative_noise;
  record["applied"] = true;
}

std::optional<double> Evaluation::bandwidth_gbs(WorkerClient& reference,
                                                const std::string& device_id, bool again) {
  std::string safe_id = device_id;
  for (char& c : safe_id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  }
  const auto dir = shared_.config.cache_dir / "bandwidth";
  // ".queued": measured on the queued clock (older files timed a window with host time in it).
  const auto file = dir / (safe_id + ".queued.json");
  std::optional<double> cached;
  nlohmann::json cached_tflops;  // {precision: TFLOP/s}, the matmul roof
  {
    std::ifstream in(file);
    nlohmann::json stored;
    if (in && (in >> stored) && stored.is_object() && stored.contains("gbs")) {
      cached = stored["gbs"].get<double>();
      if (stored.contains(proto::reply::kMatmulTflops) &&
          stored[proto::reply::kMatmulTflops].is_object())
        cached_tflops = stored[proto::reply::kMatmulTflops];
    }
  }
  // A GPU's bandwidth is measured once. A CPU's moves with the other work on its memory bus: the
  // highest seen is kept (the floor must never be too high), and it is measured again only where
  // a flag would rest on it (the speed_of_light defense), not in every evaluation's exclusive hold,
  // where the measurement (allocating and first touching 512 MB) took about 2 s of a CPU's.
  // A file from before the matmul roof was measured is measured once more.
  if (cached && !cached_tflops.empty() && !(again && device_ == "cpu")) {
    matmul_tflops_ = cached_tflops;
    return cached;
  }
  try {
    const auto reply =
        call_as(reference, Side::kReference, {{proto::request::kOp, proto::op::kBandwidth}},
                after(options_.timing.call_timeout_s));
    const auto& measured_json = reply.header.at(proto::reply::kBandwidth);
    const auto measured = measured_json.at(proto::reply::kGbs).get<double>();
    const double best = std::max(measured, cached.value_or(0.0));
    // The highest seen per precision, as for the bandwidth.
    nlohmann::json tflops = cached_tflops.is_object() ? cached_tflops : nlohmann::json::object();
    const nlohmann::json measured_tflops =
        measured_json.value(proto::reply::kMatmulTflops, nlohmann::json::object());
    for (const auto& [precision, value] : measured_tflops.items()) {
      if (value.is_number())
        tflops[precision] = std::max(value.get<double>(), tflops.value(precision, 0.0));
    }
    matmul_tflops_ = tflops;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    try {
      write_file_atomic(file, nlohmann::json{{"gbs", best},
                                             {proto::reply::kMatmulTflops, tflops},
                                             {"last", measured_json}}
                                  .dump());
    } catch (const std::exception&) {  // unwritten, it is measured again next time
    }
    return best;
  } catch (const SideFailure& e) {
    verdict_.details["bandwidth_unavailable"] = std::string(e.what());
    if (cached_tflops.is_object()) matmul_tflops_ = cached_tflops;
    return cached;
  }
}

void Evaluation::record_flops() {
  if (!reference_flops_.is_object() || reference_flops_.empty()) return;
  double total = 0;
  for (const auto& [precision, flops] : reference_flops_.items()) {
    if (flops.is_number()) total += flops.get<double>();
  }
  if (total <= 0) return;
  nlohmann::json record = {{"per_call", total}, {"by_precision", reference_flops_}};
  if (matmul_tflops_.is_object() && !matmul_tflops_.empty()) record["peak_tflops"] = matmul_tflops_;
  verdict_.details["flops"] = std::move(record);
}

}  // namespace cudal1
