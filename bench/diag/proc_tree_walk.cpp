// CPU per walk of a worker's process tree, by the kernel's children lists (process_tree) and by a
// scan of all of /proc (scanned_process_tree), beside N other processes (default 1000): what the
// orchestrator pays for each memory and CPU check of a worker, and each pause, resume and kill.
//   g++ -O2 -std=c++20 -Isrc/include bench/diag/proc_tree_walk.cpp build/libcudal1_wire.a \
//       -o /tmp/proc_tree_walk && /tmp/proc_tree_walk 1000
// Results: bench/results/2026-11-28-proc-tree.md.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <vector>

#include "cudal1/common/proc_tree.hpp"
using namespace cudal1;
static double cpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char** argv) {
  const int others = argc > 1 ? atoi(argv[1]) : 1000;
  std::vector<pid_t> kids;
  for (int i = 0; i < others; ++i) {
    pid_t p = fork();
    if (p == 0) {
      pause();
      _exit(0);
    }
    kids.push_back(p);
  }
  pid_t worker = fork();
  if (worker == 0) {
    if (fork() == 0) pause();
    pause();
    _exit(0);
  }
  usleep(300000);
  for (int mode = 0; mode < 2; ++mode) {
    const int n = 200;
    double c = cpu();
    size_t size = 0;
    for (int i = 0; i < n; ++i)
      size = (mode ? process_tree(worker) : scanned_process_tree(worker)).size();
    printf("%s: %zu processes in the tree, %.3f ms CPU per walk beside %d others\n",
           mode ? "children lists" : "scan of /proc", size, (cpu() - c) / n * 1e3, others);
  }
  for (pid_t p : kids) kill(p, SIGKILL);
  kill(-worker, SIGKILL);
  kill(worker, SIGKILL);
  return 0;
}
