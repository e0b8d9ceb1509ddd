// Self-contained HTML reports of bench and optimize results and of training: one file, scripts
// and styles inlined, data embedded as JSON, a Content-Security-Policy that allows no network
// access and no script but our own inlined ones.
#pragma once

#include <string>

#include "cudal1/report/bench_run.hpp"
#include "cudal1/report/optimize_run.hpp"
#include "cudal1/report/report_assets.hpp"
#include "cudal1/report/training_run.hpp"

namespace cudal1::report {

struct ReportOptions {
  std::string title;  // default: derived from the directory
};

std::string render_bench_report(const BenchRun& run, const ReportAssets& assets,
                                const ReportOptions& options = {});
std::string render_optimize_report(const OptimizeRun& run, const ReportAssets& assets,
                                   const ReportOptions& options = {});
// The training view of a store (cudal1 report --db): rewards per step, rejected completions,
// the best speedup per task so far.
std::string render_training_report(const TrainingRun& run, const ReportAssets& assets,
                                   const ReportOptions& options = {});

}  // namespace cudal1::report
