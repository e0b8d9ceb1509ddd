// A build folder packed on one host and unpacked on another (build workers), and which
// toolchains make builds each other can load.
#include "cudal1/eval/build_artifact.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cudal1/common/paths.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/remote_builds.hpp"

namespace cudal1 {
namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  return make_private_directory(fs::temp_directory_path(), "cudal1-artifact-");
}

long long modified_ns(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

// The manifest's bytes within a blob, replaced by `manifest` (the sizes line updated).
std::string with_manifest(const std::string& blob, const std::string& manifest) {
  const std::size_t first = blob.find('\n');
  const std::size_t second = blob.find('\n', first + 1);
  const std::size_t length = std::stoul(blob.substr(first + 1, second - first - 1));
  return blob.substr(0, first + 1) + std::to_string(manifest.size()) + "\n" + manifest +
         blob.substr(second + 1 + length);
}

TEST(BuildArtifact, RoundTripKeepsFilesTimesAndModes) {
  const fs::path dir = scratch();
  const fs::path from = dir / "from";
  fs::create_directories(from / "ext" / "empty");
  write_file_atomic(from / "ext" / "ext.so", std::string("\x7f"
                                                         "ELF\0binary",
                                                         11));
  write_file_atomic(from / "ext" / "build.ninja", "rule cxx\n");
  write_file_atomic(from / "top.json", "{}");
  ::chmod((from / "ext" / "ext.so").c_str(), 0755);
  const timespec old_time[2] = {{0, UTIME_OMIT}, {1700000000, 123456789}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (from / "ext" / "build.ninja").c_str(), old_time, 0), 0);
  fs::create_symlink("/etc/passwd", from / "ext" / "link");  // left out

  const PackedFolder packed = pack_folder(from);
  EXPECT_EQ(packed.files, 3u);
  EXPECT_EQ(packed.skipped, 1u);
  EXPECT_EQ(pack_folder(from).blob, packed.blob) << "the same folder packs the same bytes";

  const fs::path to = dir / "to";
  unpack_folder(packed.blob, to);
  EXPECT_EQ(read_file(to / "ext" / "ext.so"), std::string("\x7f"
                                                          "ELF\0binary",
                                                          11));
  EXPECT_EQ(read_file(to / "top.json"), "{}");
  EXPECT_TRUE(fs::is_directory(to / "ext" / "empty"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(to / "ext" / "link")));
  EXPECT_EQ(modified_ns(to / "ext" / "build.ninja"), 1700000000LL * 1000000000LL + 123456789);
  EXPECT_EQ(modified_ns(to / "ext" / "ext.so"), modified_ns(from / "ext" / "ext.so"));
  EXPECT_TRUE((fs::status(to / "ext" / "ext.so").permissions() & fs::perms::owner_exec) !=
              fs::perms::none);
  EXPECT_THROW(unpack_folder(packed.blob, to), std::runtime_error) << "into an existing folder";

  // A build that made no folder packs to an empty one.
  const PackedFolder empty = pack_folder(dir / "missing");
  EXPECT_EQ(empty.files, 0u);
  unpack_folder(empty.blob, dir / "empty-out");
  EXPECT_TRUE(fs::is_empty(dir / "empty-out"));
  fs::remove_all(dir);
}

TEST(BuildArtifact, RefusesPathsOutsideItsFolderAndBrokenBlobs) {
  const fs::path dir = scratch();
  fs::create_directories(dir / "from");
  write_file_atomic(dir / "from" / "a.txt", "abc");
  const std::string blob = pack_folder(dir / "from").blob;
  int attempt = 0;
  for (const char* path : {"../escaped.txt", "/tmp/escaped.txt", "x/../../escaped.txt", ""}) {
    const nlohmann::json manifest = nlohmann::json::array(
        {{{"path", path}, {"bytes", 3}, {"mtime_ns", 0}, {"executable", false}}});
    const fs::path target = dir / ("out" + std::to_string(++attempt));
    EXPECT_THROW(unpack_folder(with_manifest(blob, manifest.dump()), target), std::runtime_error)
        << path;
    EXPECT_FALSE(fs::exists(target)) << "a refused blob leaves nothing behind";
  }
  EXPECT_FALSE(fs::exists(dir / "escaped.txt"));
  EXPECT_THROW(unpack_folder("not a build", dir / "o1"), std::runtime_error);
  EXPECT_THROW(unpack_folder(blob.substr(0, blob.size() - 1), dir / "o2"), std::runtime_error);
  EXPECT_THROW(unpack_folder(blob + "x", dir / "o3"), std::runtime_error);
  EXPECT_THROW(unpack_folder(with_manifest(blob, "{not json"), dir / "o4"), std::runtime_error);
  EXPECT_THROW(pack_folder(dir / "from", 2), std::runtime_error) << "over its size limit";
  fs::remove_all(dir);
}

TEST(RemoteBuilds, BuildToolchainLeavesOutTheKernelGpusAndTimes) {
  const nlohmann::json gpu_host = {
      {"python", "3.12.3"},
      {"torch", "2.11.0"},
      {"torch_cuda", "13.0"},
      {"cxx", "c++ 13.3.0"},
      {"nvcc", "Build cuda_13.0"},
      {"cuda_available", true},
      {"capabilities", {"9.0"}},
      {"platform", "Linux-6.8.0-51-generic-x86_64-with-glibc2.39"},
      {"torch_headers", {"/usr/lib/python3/torch/include/torch/extension.h@1700000000"}}};
  nlohmann::json cpu_host = gpu_host;
  cpu_host["cuda_available"] = false;
  cpu_host.erase("capabilities");
  cpu_host["platform"] = "Linux-6.1.0-26-amd64-x86_64-with-glibc2.39";
  cpu_host["torch_headers"] = {"/usr/lib/python3/torch/include/torch/extension.h@1712345678"};
  EXPECT_EQ(build_toolchain_id(gpu_host), build_toolchain_id(cpu_host));
  nlohmann::json other = cpu_host;
  other["torch"] = "2.10.0";
  EXPECT_NE(build_toolchain_id(gpu_host), build_toolchain_id(other));
  other = cpu_host;
  other["torch_headers"] = {"/opt/venv/torch/include/torch/extension.h@1712345678"};
  EXPECT_NE(build_toolchain_id(gpu_host), build_toolchain_id(other)) << "ninja records paths";
  other = cpu_host;
  other["platform"] = "Linux-6.1.0-26-amd64-x86_64-with-glibc2.36";
  EXPECT_NE(build_toolchain_id(gpu_host), build_toolchain_id(other));
}

TEST(RemoteBuilds, BuildJobRoundTrip) {
  BuildJob job;
  job.key = "abc";
  job.toolchain = {{"torch", "2.11.0"}};
  job.init_seed = 18446744073709551557ull;
  job.build_s = 120;
  job.task_path = "/x/task.py";
  job.task_source = "class Model: pass";
  job.candidate_path = "/x/cand.py";
  job.candidate_source = "class ModelNew: pass";
  const BuildJob back = BuildJob::from_json(job.to_json());
  EXPECT_EQ(back.to_json(), job.to_json());
  nlohmann::json broken = job.to_json();
  broken.erase("key");
  EXPECT_THROW(BuildJob::from_json(broken), std::runtime_error);
}

}  // namespace
}  // namespace cudal1
