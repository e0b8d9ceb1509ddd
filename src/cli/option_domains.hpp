// The domains of command-line values, checked while the command line is parsed: a value outside
// its option's domain ends the command with exit code 2 before anything runs, and CLI11 puts the
// option's name before the message, which names the value ("--trials: 0 is not a whole number of
// at least 1"). Input files and folders use CLI11's own CLI::ExistingFile and
// CLI::ExistingDirectory; what only opening a value shows (a store SQLite refuses) is checked
// where it is opened (store_option.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

namespace cudal1::cli {

// Whole numbers from `least` up: 1 for counts of which none makes no sense, 0 where 0 means
// something (the option's help says what). Needed by unsigned options for negative values too,
// which CLI11 would wrap around to the type's largest value ("-1" as 2^64-1).
CLI::Validator whole_number(std::int64_t least);

// Seconds a run waits or measures: above 0 (and from `at_least` on), and at most a year, which is
// longer than any evaluation or run and keeps deadlines far from the overflow of the clocks'
// nanoseconds ("inf" is no budget: the time it never reaches would be blamed on the reference).
CLI::Validator seconds(double at_least = 0);

// Finite numbers above 0 and up to `at_most` (sizes, speedups, widths); "inf" and "nan" are no
// size.
CLI::Validator positive_number(double at_most = std::numeric_limits<double>::max());

// Finite numbers of 0 or more (a temperature, a minimum speedup).
CLI::Validator non_negative_number();

// Any finite number (a reward, which may be negative).
CLI::Validator finite_number();

// Shares of a whole: in (0, 1].
CLI::Validator fraction();

// A file a command writes: not a folder, in a folder that exists and may be written in (and not
// an existing file that may not be written).
CLI::Validator output_file();

// A folder a command writes in, created with its parents when missing: not a file, and the
// folder itself or the nearest one above it that exists may be written in.
CLI::Validator output_folder();

}  // namespace cudal1::cli
