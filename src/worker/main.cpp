// cudal1-worker: hosts the user's PyTorch code for the cudal1 orchestrator.
//
//   cudal1-worker inspect FILE   syntax check and top-level names of a Python file (JSON)
//   cudal1-worker probe          the toolchain a compiled candidate depends on (JSON)
//   cudal1-worker serve          request loop on fd 3 (requests) and fd 4 (replies)
//   cudal1-worker zygote         imports PyTorch, then forks serving workers on request (fd 3)
//   cudal1-worker pch DIR        makes PyTorch's extension header precompiled in DIR (JSON)
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cudal1/worker/protocol.hpp"
#include "python_runtime.hpp"
#include "session.hpp"
#include "zygote.hpp"

namespace {

namespace proto = cudal1::worker_protocol;

int print_json(const nlohmann::json& value) {
  std::cout << value.dump() << std::endl;
  return 0;
}

int usage() {
  std::cerr << "usage: cudal1-worker inspect FILE | probe | serve | zygote | pch DIR\n"
               "This program is started by cudal1; it is not meant to be run by hand.\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string mode = argv[1];
  int code = 0;
  try {
    cudal1::worker::PythonRuntime runtime;
    if (mode == proto::mode::kInspect && argc == 3) {
      code = print_json(cudal1::worker::to_json(runtime.host("inspect_source")(argv[2])));
    } else if (mode == proto::mode::kProbe) {
      code = print_json(cudal1::worker::to_json(runtime.host("toolchain")()));
    } else if (mode == proto::mode::kServe) {
      cudal1::worker::Session session(runtime, proto::kRequestFd, proto::kReplyFd);
      code = session.run();
    } else if (mode == proto::mode::kPrecompiledHeader && argc == 3) {
      code = print_json(
          cudal1::worker::to_json(runtime.host("make_precompiled_header")(std::string(argv[2]))));
    } else if (mode == proto::mode::kZygote) {
      code = cudal1::worker::run_zygote(runtime, proto::kZygoteFd);
    } else {
      code = usage();
    }
  } catch (const std::exception& e) {
    std::cerr << "cudal1-worker: " << e.what() << std::endl;
    code = 1;
  }
  std::fflush(nullptr);
  // Skips interpreter finalization and static destructors of user extensions (see PythonRuntime).
  _exit(code);
}
