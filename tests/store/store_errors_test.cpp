// Files the store cannot use: each refusal is a StoreError that names the path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "cudal1/store/store.hpp"
#include "store_fixture.hpp"

namespace cudal1::store::testing {
namespace {

class StoreErrors : public StoreFixture {
 protected:
  // The StoreError's message from opening `path`, or "" when it opened.
  static std::string open_error(const std::filesystem::path& path) {
    try {
      Store store(path);
      store.counts(1);
    } catch (const StoreError& e) {
      return e.what();
    }
    return "";
  }

  // open_error() as a user without root's power to write anywhere: root (as in containers)
  // ignores file permissions, so the child process becomes `nobody` first.
  static std::string open_error_unprivileged(const std::filesystem::path& path) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return "pipe failed";
    const pid_t child = ::fork();
    if (child == 0) {
      ::close(pipe_fds[0]);
      constexpr uid_t kNobody = 65534;
      if (::geteuid() == 0 && (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)) ::_exit(2);
      const std::string message = open_error(path);
      const bool written = ::write(pipe_fds[1], message.data(), message.size()) ==
                           static_cast<ssize_t>(message.size());
      ::_exit(written ? 0 : 3);
    }
    ::close(pipe_fds[1]);
    std::string message;
    char buffer[512];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;)
      message.append(buffer, n);
    ::close(pipe_fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    return message;
  }

  void write_file(const std::filesystem::path& path, const std::string& content) {
    std::ofstream(path, std::ios::binary) << content;
  }

  // A directory the unprivileged child can enter and read but not write.
  std::filesystem::path read_only_directory() {
    const auto path = directory_ / "read-only";
    std::filesystem::create_directory(path);
    ::chmod(directory_.c_str(), 0755);
    return path;
  }

  void TearDown() override {
    std::filesystem::permissions(directory_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add);
    if (std::filesystem::exists(directory_ / "read-only")) {
      std::filesystem::permissions(directory_ / "read-only", std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add);
    }
    StoreFixture::TearDown();
  }
};

#define EXPECT_NAMES(message, path) \
  EXPECT_NE((message).find((path).string()), std::string::npos) << "message: " << (message)

TEST_F(StoreErrors, DirectoryIsNotADatabase) {
  const auto message = open_error(directory_);
  ASSERT_FALSE(message.empty());
  EXPECT_NAMES(message, directory_);
  EXPECT_NE(message.find("directory"), std::string::npos) << message;
}

TEST_F(StoreErrors, TextFileIsNotADatabase) {
  const auto path = directory_ / "notes.txt";
  write_file(path, std::string(4096, 'n') + "\nnot an SQLite database\n");
  const auto message = open_error(path);
  ASSERT_FALSE(message.empty());
  EXPECT_NAMES(message, path);
  EXPECT_NE(message.find("not a database"), std::string::npos) << message;
}

TEST_F(StoreErrors, DamagedSchemaPageIsReportedOnOpen) {
  {
    Store store(database_);
    store.upsert_task("/tasks/t.py", "source");
  }
  // Page 1 after its 100-byte file header holds the table definitions.
  std::fstream file(database_, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(100);
  const std::string garbage(1000, '\xA5');
  file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  file.close();
  const auto message = open_error(database_);
  ASSERT_FALSE(message.empty());
  EXPECT_NAMES(message, database_);
  EXPECT_NE(message.find("malformed"), std::string::npos) << message;
}

TEST_F(StoreErrors, MissingDirectoryIsReported) {
  const auto path = directory_ / "no" / "such" / "cudal1.db";
  const auto message = open_error(path);
  ASSERT_FALSE(message.empty());
  EXPECT_NAMES(message, path);
}

TEST_F(StoreErrors, ReadOnlyDirectoryCannotHoldANewStore) {
  const auto directory = read_only_directory();
  ::chmod(directory.c_str(), 0555);
  const auto path = directory / "cudal1.db";
  const auto message = open_error_unprivileged(path);
  ASSERT_FALSE(message.empty()) << "opened a store in a read-only directory";
  EXPECT_NAMES(message, path);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(StoreErrors, ReadOnlyStoreIsRefusedOnOpen) {
  const auto directory = read_only_directory();
  const auto path = directory / "cudal1.db";
  {
    Store store(path);
    store.upsert_task("/tasks/t.py", "source");
  }
  ::chmod(path.c_str(), 0444);
  ::chmod(directory.c_str(), 0555);
  const auto message = open_error_unprivileged(path);
  ASSERT_FALSE(message.empty()) << "opened a store that cannot be written";
  EXPECT_NAMES(message, path);
  EXPECT_NE(message.find("read-only"), std::string::npos) << message;
}

}  // namespace
}  // namespace cudal1::store::testing
