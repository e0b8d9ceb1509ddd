// The stored toolchain probe: reused while nothing it depends on changed, probed again otherwise.
#include "cudal1/eval/toolchain.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "cudal1/common/paths.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1 {
namespace {

// A stand-in worker: `probe` prints a toolchain that depends on DEP and counts its runs.
class ToolchainCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_private_directory(std::filesystem::temp_directory_path(), "cudal1-toolchain-");
    dependency_ = dir_ / "torch_version.py";
    counter_ = dir_ / "probes";
    std::ofstream(dependency_) << "__version__ = '1'\n";
    worker_ = dir_ / "worker.sh";
    std::ofstream(worker_) << "#!/bin/sh\n"
                           << "echo x >> '" << counter_.string() << "'\n"
                           << "echo '{\"torch\": \"1\", \"cuda_available\": false, "
                           << "\"depends_on\": [\"" << dependency_.string() << "\"]}'\n";
    std::filesystem::permissions(worker_, std::filesystem::perms::owner_all);
    ::unsetenv("CUDAL1_TOOLCHAIN_CACHE");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  int probes() const {
    std::ifstream in(counter_);
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

  std::filesystem::path dir_, dependency_, counter_, worker_;
};

TEST_F(ToolchainCache, SecondLoadReusesTheStoredProbeWithTheSameFingerprint) {
  const Toolchain first = Toolchain::load_or_probe(worker_, dir_);
  const Toolchain second = Toolchain::load_or_probe(worker_, dir_);
  EXPECT_EQ(probes(), 1);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(first.fingerprint, second.fingerprint);
  EXPECT_EQ(second.info.value("torch", ""), "1");
}

TEST_F(ToolchainCache, FingerprintLeavesOutWhereTheAnswerCameFrom) {
  Toolchain plain = Toolchain::probe(worker_, dir_ / "probe.log");
  nlohmann::json info = plain.info;
  info.erase("depends_on");
  std::ofstream(worker_) << "#!/bin/sh\necho '" << info.dump() << "'\n";
  EXPECT_EQ(Toolchain::probe(worker_, dir_ / "probe.log").fingerprint, plain.fingerprint);
}

TEST_F(ToolchainCache, AChangedDependencyMeansANewProbe) {
  Toolchain::load_or_probe(worker_, dir_);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(dependency_) << "__version__ = '2'  # upgraded\n";
  EXPECT_FALSE(Toolchain::load_or_probe(worker_, dir_).from_cache);
  EXPECT_EQ(probes(), 2);
  EXPECT_TRUE(Toolchain::load_or_probe(worker_, dir_).from_cache);
}

TEST_F(ToolchainCache, ARemovedDependencyMeansANewProbe) {
  Toolchain::load_or_probe(worker_, dir_);
  std::filesystem::remove(dependency_);
  EXPECT_FALSE(Toolchain::load_or_probe(worker_, dir_).from_cache);
}

TEST_F(ToolchainCache, ARebuiltWorkerMeansANewProbe) {
  Toolchain::load_or_probe(worker_, dir_);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(worker_, std::ios::app) << "# rebuilt\n";
  EXPECT_FALSE(Toolchain::load_or_probe(worker_, dir_).from_cache);
}

TEST_F(ToolchainCache, AnotherGpuSelectionMeansANewProbe) {
  const char* before = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string saved = before ? before : "";
  Toolchain::load_or_probe(worker_, dir_);
  ::setenv("CUDA_VISIBLE_DEVICES", "cudal1-test", 1);
  const bool cached = Toolchain::load_or_probe(worker_, dir_).from_cache;
  if (before) {
    ::setenv("CUDA_VISIBLE_DEVICES", saved.c_str(), 1);
  } else {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
  EXPECT_FALSE(cached);
}

TEST_F(ToolchainCache, AnOldOrDamagedStoreMeansANewProbe) {
  Toolchain::load_or_probe(worker_, dir_);
  EXPECT_FALSE(Toolchain::load_or_probe(worker_, dir_, /*max_age_s=*/0).from_cache);
  write_file_atomic(dir_ / "toolchain.json", "{not json");
  EXPECT_FALSE(Toolchain::load_or_probe(worker_, dir_).from_cache);
  EXPECT_TRUE(Toolchain::load_or_probe(worker_, dir_).from_cache);
}

TEST_F(ToolchainCache, TurnedOffByTheEnvironment) {
  Toolchain::load_or_probe(worker_, dir_);
  ::setenv("CUDAL1_TOOLCHAIN_CACHE", "off", 1);
  const bool cached = Toolchain::load_or_probe(worker_, dir_).from_cache;
  ::unsetenv("CUDAL1_TOOLCHAIN_CACHE");
  EXPECT_FALSE(cached);
  EXPECT_EQ(probes(), 2);
}

}  // namespace
}  // namespace cudal1
