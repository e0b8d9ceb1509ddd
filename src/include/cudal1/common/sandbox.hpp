// A process's own view of the machine, made with bubblewrap (Debian's `bubblewrap`, `bwrap`):
// its own PID, mount, network, IPC, UTS and cgroup namespaces; the system's directories read-only;
// nothing of the host's files besides what the view names; a private /tmp and /dev/shm of bounded
// size; no network but its own loopback. Everything in the PID namespace dies with its first
// process, so nothing the sandboxed program starts outlives the sandbox.
//
// Why bubblewrap: it is packaged by Debian and Ubuntu, small (one setuid-free binary), used for
// exactly this by Flatpak, and takes the whole view as arguments, so a sandbox costs one exec and
// no daemon. nsjail would add seccomp policies, but it is not packaged for Debian 12.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cudal1 {

struct SandboxMount {
  enum class Access { kReadOnly, kWritable, kDevice };
  Access access = Access::kReadOnly;
  std::filesystem::path source;
  std::filesystem::path target;  // where the process sees it; the source's own path when empty
};

// A user and group of the sandbox's own (root mode): nobody else's files are its files, its
// processes count against its own RLIMIT_NPROC, and it can signal nothing outside.
struct SandboxUser {
  uid_t uid = 0;
  gid_t gid = 0;
};

struct SandboxView {
  // Besides the system's directories (/usr, /lib*, /bin, /sbin, parts of /etc) and /sys.
  std::vector<SandboxMount> mounts;
  // Paths hidden under an empty read-only directory (a mount inside one of the others); of what
  // they held, mounts may bring back their own entries (bubblewrap makes those mount points).
  std::vector<std::filesystem::path> hidden;
  // Size of each of the private /tmp and /dev/shm (memory that resident-size checks miss).
  std::uint64_t tmp_bytes = 1ull << 30;
  // Root mode only: the command runs as this user, with no capabilities.
  std::optional<SandboxUser> user;
  // Empty directories made for what the command mounts there itself.
  std::vector<std::filesystem::path> directories;
  // The command makes namespaces and mounts of its own for the processes it forks, which give
  // up every capability (a zygote: cudal1/eval/worker_forks.hpp): it keeps CAP_SYS_ADMIN and
  // CAP_SETPCAP inside the sandbox, and in root mode runs as root there (no user of its own)
  // with CAP_KILL (its forks' workers are users of their own, killed by it when their cudal1
  // process is gone).
  bool forks = false;
  // The sandbox stays when the process that made it ends (a shared zygote, which ends itself).
  bool outlives_caller = false;
};

// How this machine makes sandboxes.
struct SandboxSupport {
  enum class Mode {
    kUnavailable,
    // Run by root: no user namespace; bwrap keeps only the capabilities to change user, and the
    // command is started as a user of its own (setpriv), with none.
    kRootUser,
    // Run by another user: an unprivileged user namespace, every capability dropped, no further
    // user namespaces inside.
    kUserNamespace,
  };
  Mode mode = Mode::kUnavailable;
  std::filesystem::path bwrap;
  std::filesystem::path setpriv;  // root mode
  std::string why_unavailable;

  bool available() const { return mode != Mode::kUnavailable; }
  std::string describe() const;  // "bubblewrap, root mode (a user of its own)", or why not

  // Found once per process: `bwrap` on PATH (or $CUDAL1_BWRAP) that can start /bin/true in a
  // sandbox of this kind.
  static const SandboxSupport& probe();
};

// The argv that runs `command` (an absolute program path first) inside `view`.
std::vector<std::string> sandbox_argv(const SandboxSupport& support, const SandboxView& view,
                                      const std::vector<std::string>& command);

// A user id for the next sandbox of this process (root mode): outside the range of system and
// login users, different for every sandbox a process makes, so that two sandboxes never share
// files or a process count.
SandboxUser next_sandbox_user();

// The environment a sandboxed (or any untrusted) process gets: only the variables a build or a
// PyTorch run needs, copied from this process's environment, then `overrides`. Nothing named
// CUDAL1_*, no credentials (names with TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL, AUTH), no proxy
// settings.
std::map<std::string, std::string> allowlisted_environment(
    const std::map<std::string, std::string>& overrides);

}  // namespace cudal1
