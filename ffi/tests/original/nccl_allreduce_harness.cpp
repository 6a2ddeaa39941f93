// The original C++ example's AllReduce (nccl_allreduce_body.inc, included verbatim) in a harness
// that gives it what it expects: a PJRT_NcclClient with a `rank`, contains_nan, and nccl.h (a
// stand-in in include/, whose ncclAllReduce is defined here and sums two ranks' buffers).
//
// The body only mentions the collective in a comment, so the client's Step runs it first and
// then the body, which reads recv_buffer only after it opened its span: the trace is the same
// as if the body had run it.
//
// usage: nccl_allreduce_harness procs DIR     two ranks as two processes, over a socket pair
//        nccl_allreduce_harness threads DIR   two ranks as two threads, over shared memory
//
// Three steps of four floats; in step 1 rank 1's input holds a NaN, so rank 1 records "Input
// buffer contains NaN" and rank 0 "Output buffer is NaN after AllReduce". Each rank checks the
// sums it received. DIR is the ranks' working directory. The harness starts no session: it
// records only when the environment starts one. In procs mode each rank is a fresh process
// (fork, then exec of this program as `rank N FD`) with WAFFLE_RANK=N in its environment, so
// that nothing of the launcher's recording state crosses a fork. Prints "ok" when both ranks
// succeeded.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"

extern char** environ;

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// What the body calls.
static bool contains_nan(const float* buf, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (std::isnan(buf[i])) return true;
  }
  return false;
}

// The class the body is a member function of.
class PJRT_NcclClient {
 public:
  PJRT_NcclClient(int r, ncclComm_t comm) : rank(r), comm_(comm) {}

  // One collective as the application calls it: the exchange, then the body.
  void Step(float* send_buffer, float* recv_buffer, size_t count) {
    CHECK(ncclAllReduce(send_buffer, recv_buffer, count, ncclFloat32, ncclSum, comm_, nullptr) ==
          ncclSuccess);
    AllReduce(send_buffer, recv_buffer, count);
  }

  // The original example's body.
  void AllReduce(float* send_buffer, float* recv_buffer, size_t count);

  int rank;

 private:
  ncclComm_t comm_;
};

#include "nccl_allreduce_body.inc"

namespace {

void write_all(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    CHECK(n > 0);
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void read_all(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    CHECK(n > 0);
    p += n;
    len -= static_cast<size_t>(n);
  }
}

// Threads mode: the two ranks' send buffers and a barrier.
struct SharedBuffers {
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;
  unsigned generation = 0;
  const float* send[2] = {nullptr, nullptr};

  void Barrier() {
    std::unique_lock<std::mutex> lock(mutex);
    unsigned gen = generation;
    if (++arrived == 2) {
      arrived = 0;
      generation++;
      changed.notify_all();
    } else {
      changed.wait(lock, [&] { return generation != gen; });
    }
  }
};

}  // namespace

// The stand-in communicator: a socket to the other process, or the buffers both threads share.
struct ncclComm {
  int rank;
  int fd;                  // procs mode; -1 in threads mode
  SharedBuffers* shared;   // threads mode; null in procs mode
};

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t /*stream*/) {
  if (comm == nullptr || datatype != ncclFloat32 || op != ncclSum) return ncclInvalidArgument;
  const float* send = static_cast<const float*>(sendbuff);
  std::vector<float> theirs(count);
  if (comm->shared == nullptr) {
    write_all(comm->fd, send, count * sizeof(float));
    read_all(comm->fd, theirs.data(), count * sizeof(float));
  } else {
    SharedBuffers& shared = *comm->shared;
    shared.send[comm->rank] = send;
    shared.Barrier();  // both buffers are published
    std::memcpy(theirs.data(), shared.send[1 - comm->rank], count * sizeof(float));
    shared.Barrier();  // both are copied: the ranks may go on and change them
  }
  float* recv = static_cast<float*>(recvbuff);
  for (size_t i = 0; i < count; i++) recv[i] = send[i] + theirs[i];
  return ncclSuccess;
}

namespace {

const int kSteps = 3;
const int kNanStep = 1;
const size_t kCount = 4;

float Input(int rank, int step, size_t i) { return static_cast<float>(rank * 10 + step + static_cast<int>(i)); }

void RunRank(int rank, ncclComm* comm) {
  PJRT_NcclClient client(rank, comm);
  for (int step = 0; step < kSteps; step++) {
    std::vector<float> send(kCount), recv(kCount);
    for (size_t i = 0; i < kCount; i++) send[i] = Input(rank, step, i);
    if (rank == 1 && step == kNanStep) send[1] = NAN;  // the bug: a corrupt sample on rank 1
    client.Step(send.data(), recv.data(), kCount);
    for (size_t i = 0; i < kCount; i++) {
      if (step == kNanStep && i == 1) {
        CHECK(std::isnan(recv[i]));
      } else {
        CHECK(recv[i] == Input(0, step, i) + Input(1, step, i));
      }
    }
  }
}

// Waits for a rank process; true if it exited with 0.
bool Succeeded(pid_t pid) {
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int Procs(const char* argv0, const char* dir) {
  int fds[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  // Everything the children need is built before fork: between fork and exec they only call
  // async-signal-safe functions.
  std::vector<std::string> args[2], env[2];
  std::vector<char*> argv[2], envp[2];
  for (int rank = 0; rank < 2; rank++) {
    args[rank] = {argv0, "rank", std::to_string(rank), std::to_string(fds[rank])};
    for (char** e = environ; *e != nullptr; e++) {
      if (std::strncmp(*e, "WAFFLE_RANK=", 12) != 0) env[rank].emplace_back(*e);
    }
    env[rank].push_back("WAFFLE_RANK=" + std::to_string(rank));
    for (auto& a : args[rank]) argv[rank].push_back(a.data());
    argv[rank].push_back(nullptr);
    for (auto& e : env[rank]) envp[rank].push_back(e.data());
    envp[rank].push_back(nullptr);
  }
  pid_t pids[2];
  for (int rank = 0; rank < 2; rank++) {
    pids[rank] = fork();
    CHECK(pids[rank] >= 0);
    if (pids[rank] == 0) {
      close(fds[1 - rank]);
      if (chdir(dir) == 0) execve("/proc/self/exe", argv[rank].data(), envp[rank].data());
      _exit(127);
    }
  }
  close(fds[0]);
  close(fds[1]);
  bool ok0 = Succeeded(pids[0]);
  bool ok1 = Succeeded(pids[1]);
  return ok0 && ok1 ? 0 : 1;
}

int Threads(const char* dir) {
  CHECK(chdir(dir) == 0);
  SharedBuffers shared;
  ncclComm comms[2] = {{0, -1, &shared}, {1, -1, &shared}};
  std::thread rank0(RunRank, 0, &comms[0]);
  std::thread rank1(RunRank, 1, &comms[1]);
  rank0.join();
  rank1.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "rank") == 0) {  // one rank of procs mode
    ncclComm comm{std::atoi(argv[2]), std::atoi(argv[3]), nullptr};
    CHECK(comm.rank == 0 || comm.rank == 1);
    RunRank(comm.rank, &comm);
    return 0;
  }
  int rc = 2;
  if (argc == 3 && std::strcmp(argv[1], "procs") == 0) {
    rc = Procs(argv[0], argv[2]);
  } else if (argc == 3 && std::strcmp(argv[1], "threads") == 0) {
    rc = Threads(argv[2]);
  } else {
    std::fprintf(stderr, "usage: %s procs|threads DIR\n", argv[0]);
  }
  if (rc == 0) std::printf("ok\n");
  return rc;
}
