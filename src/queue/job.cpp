#include "cudal1/queue/job.hpp"

#include <fmt/format.h>

#include "cudal1/common/sha256.hpp"

namespace cudal1::queue {
namespace {

using nlohmann::json;

// A field keeps its default when absent (a job from an older submitter); a present field of the
// wrong type is an error that names it.
template <typename T>
void read(const json& object, const char* name, T& field) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return;
  try {
    field = it->get<T>();
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("job field '{}': {}", name, e.what()));
  }
}

const json& object_field(const json& object, const char* name) {
  static const json kEmpty = json::object();
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return kEmpty;
  if (!it->is_object())
    throw std::runtime_error(fmt::format("job field '{}' is not an object", name));
  return *it;
}

// Every option once, with its name on the wire: sending and reading walk the same lists, so a
// field cannot be sent and then forgotten on arrival. (Templates: const to send, not to read.)
template <typename Noise, typename Visit>
void noise_fields(Noise& n, Visit&& visit) {
  visit("max_noise", n.max_noise);
  visit("min_samples", n.min_samples);
  visit("min_time_s", n.min_time_s);
  visit("max_samples", n.max_samples);
  visit("max_bucket_spread", n.max_bucket_spread);
}

template <typename Timing, typename Visit>
void timing_fields(Timing& t, Visit&& visit) {
  visit("budget_s", t.budget_s);
  visit("pool_size", t.pool_size);
  visit("max_pool_bytes", t.max_pool_bytes);
  visit("min_warmup_calls", t.min_warmup_calls);
  visit("min_warmup_s", t.min_warmup_s);
  visit("max_warmup_wall_s", t.max_warmup_wall_s);
  visit("call_timeout_s", t.call_timeout_s);
  visit("clock_floor", t.clock_floor);
  visit("check_resamples", t.check_resamples);
  visit("final_resamples", t.final_resamples);
  visit("spot_check_every", t.spot_check_every);
  visit("spot_check_share", t.spot_check_share);
  visit("spot_check_elements", t.spot_check_elements);
  visit("own_kernels", t.own_kernels);
  visit("mode", t.mode);
  visit("hold_timeout_factor", t.hold_timeout_factor);
  visit("hold_timeout_min_ms", t.hold_timeout_min_ms);
  visit("hold_timeout_max_ms", t.hold_timeout_max_ms);
  visit("queued_probe_calls", t.queued_probe_calls);
  visit("rounds", t.rounds);
  visit("auto_max_rounds", t.auto_rounds.max_rounds);
  visit("auto_rerun_target", t.auto_rounds.rerun_target);
  visit("calibration", t.calibration);
  visit("calibrate_below_ms", t.calibrate_below_ms);
  visit("streams", t.streams);
  visit("cuda_connections", t.cuda_connections);
}

template <typename Limits, typename Visit>
void limit_fields(Limits& l, Visit&& visit) {
  visit("build_s", l.build_s);
  visit("load_s", l.load_s);
  visit("correctness_s", l.correctness_s);
  visit("memory_bytes", l.memory_bytes);
  visit("gpu_memory_fraction", l.gpu_memory_fraction);
}

template <typename Options, typename Visit>
void plain_option_fields(Options& o, Visit&& visit) {
  visit("device", o.device);
  visit("trials", o.trials);
  visit("trace_activity", o.trace_activity);
  visit("require_custom_kernel", o.require_custom_kernel);
  visit("keep_workdir", o.keep_workdir);
}

auto writer(json& out) {
  return [&out](const char* name, const auto& field) { out[name] = field; };
}

auto reader(const json& in) {
  return [&in](const char* name, auto& field) { read(in, name, field); };
}

}  // namespace

json options_to_json(const EvalOptions& o) {
  json out = json::object();
  plain_option_fields(o, writer(out));
  out["seed"] = o.seed ? json(*o.seed) : json();
  out["tolerance"] = o.tolerance.spec();
  json& timing = out["timing"] = json::object();
  timing_fields(o.timing, writer(timing));
  noise_fields(o.timing.noise, writer(timing["noise"] = json::object()));
  limit_fields(o.limits, writer(out["limits"] = json::object()));
  return out;
}

EvalOptions options_from_json(const json& j) {
  EvalOptions o;
  plain_option_fields(o, reader(j));
  if (j.contains("seed") && !j["seed"].is_null()) {
    std::uint64_t seed = 0;
    read(j, "seed", seed);
    o.seed = seed;
  }
  std::string tolerance;
  read(j, "tolerance", tolerance);
  o.tolerance = Tolerance::parse(tolerance);
  const json& timing = object_field(j, "timing");
  timing_fields(o.timing, reader(timing));
  noise_fields(o.timing.noise, reader(object_field(timing, "noise")));
  limit_fields(o.limits, reader(object_field(j, "limits")));
  return o;
}

json Job::to_json() const {
  json out = {{"id", id},
              {"submitter", submitter},
              {"task_path", task_path},
              {"task_source", task_source},
              {"candidate_path", candidate_path},
              {"candidate_source", candidate_source},
              {"options", options_to_json(options)},
              {"submitted_at", submitted_at}};
  if (!build.is_null()) out["build"] = build;
  return out;
}

Job Job::from_json(const json& j) {
  if (!j.is_object()) throw std::runtime_error("a job is a JSON object");
  Job job;
  for (const char* required : {"id", "submitter", "task_source", "candidate_source"}) {
    if (!j.contains(required) || !j[required].is_string()) {
      throw std::runtime_error(fmt::format("job field '{}' is missing or not a string", required));
    }
  }
  read(j, "id", job.id);
  read(j, "submitter", job.submitter);
  read(j, "task_path", job.task_path);
  read(j, "task_source", job.task_source);
  read(j, "candidate_path", job.candidate_path);
  read(j, "candidate_source", job.candidate_source);
  job.options = options_from_json(object_field(j, "options"));
  read(j, "submitted_at", job.submitted_at);
  if (j.contains("build") && !j["build"].is_null()) job.build = object_field(j, "build");
  return job;
}

std::string job_id(const std::string& submitter, const std::string& task_source,
                   const std::string& candidate_source, const json& options,
                   std::size_t occurrence) {
  const json key = {submitter, task_source, candidate_source, options, occurrence};
  return sha256_hex(key.dump()).substr(0, 32);
}

}  // namespace cudal1::queue
