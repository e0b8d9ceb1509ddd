// How fast a tensor's bytes cross the pipe between a worker and the orchestrator: one message
// with a payload of N MiB (default 512: a 537 MB output, as CUDA-L1's 1/35_GroupNorm_ returns),
// written by a thread into a pipe of 1 MiB (as WorkerProcess sets it) and read with FrameReader.
// Prints seconds and MB/s per repetition.
//   cmake --build build --target cudal1_wire_bench && build/cudal1_wire_bench [MiB] [repetitions]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cudal1/common/wire.hpp"

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512;
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 3;
  const cudal1::wire::Message message{{{"op", "trial"}},
                                      std::vector<std::byte>(mib << 20, std::byte{7})};
  for (int i = 0; i < repetitions; ++i) {
    int fds[2];
    if (::pipe(fds) != 0) return 1;
    ::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
    const auto start = std::chrono::steady_clock::now();
    std::thread writer([&] { cudal1::wire::write_message(fds[1], message); });
    cudal1::wire::FrameReader reader;
    const auto got = cudal1::wire::read_message_blocking(fds[0], reader);
    writer.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::close(fds[0]);
    ::close(fds[1]);
    if (!got || got->payload.size() != message.payload.size()) return 1;
    std::printf("%zu MiB in %.3f s (%.0f MB/s)\n", mib, s, got->payload.size() / s / 1e6);
  }
  return 0;
}
