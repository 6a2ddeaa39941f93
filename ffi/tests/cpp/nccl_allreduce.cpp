// The C++ example of waffle's README, as two real processes: rank 0 and rank 1 (a fork) sum
// their buffers over a socket pair, four iterations. In iteration 2 rank 1's input holds a
// NaN: it records "Input buffer contains NaN" and its NcclAllReduce span is CausedBy that
// event. Rank 0 sees NaN in its output, inside its own NcclAllReduce span, which is correlated
// with rank 1's by ("allreduce", iteration). Each iteration also hands a task to a worker
// thread that injects the dispatcher's context. ffi/tests/c_api.rs decodes both files, checks
// the trees and asks `why` about the symptom.
//
// usage: nccl_allreduce DIR   (writes DIR/rank0.bin and DIR/rank1.bin)
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "waffle.hpp"

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

bool contains_nan(const float* buf, std::size_t count) {
  for (std::size_t i = 0; i < count; i++) {
    if (std::isnan(buf[i])) return true;
  }
  return false;
}

void write_all(int fd, const void* data, std::size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    CHECK(n > 0);
    p += n;
    len -= static_cast<std::size_t>(n);
  }
}

void read_all(int fd, void* data, std::size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = read(fd, p, len);
    CHECK(n > 0);
    p += n;
    len -= static_cast<std::size_t>(n);
  }
}

struct Comm {
  int fd;
  int rank;

  // Sums `send` with the peer's buffer into `recv`.
  void AllReduce(const float* send, float* recv, std::size_t count) const {
    std::vector<float> theirs(count);
    write_all(fd, send, count * sizeof(float));
    read_all(fd, theirs.data(), count * sizeof(float));
    for (std::size_t i = 0; i < count; i++) recv[i] = send[i] + theirs[i];
  }
};

// The README's AllReduce, with a correlation key added so rank 0's span reaches rank 1's.
void AllReduce(const Comm& comm, int iteration, float* send_buffer, float* recv_buffer, std::size_t count) {
  Waffle::EventId nan_source_id;  // null
  if (comm.rank == 1 && contains_nan(send_buffer, count)) {
    nan_source_id = WAFFLE_EVENT("Input buffer contains NaN", "rank", comm.rank, "suggestion",
                                 "Check data loading pipeline for this rank.");
    CHECK(!nan_source_id.is_null());
  }
  WAFFLE_SPAN("NcclAllReduce", Waffle::CausedBy(nan_source_id), waffle::Correlate("allreduce", iteration),
              "element_count", count, "rank", comm.rank);
  comm.AllReduce(send_buffer, recv_buffer, count);
  if (comm.rank == 0 && contains_nan(recv_buffer, count)) {
    WAFFLE_EVENT("Output buffer is NaN after AllReduce");
  }
}

// The README's context example: a task runs on a worker thread, parented to the dispatcher.
void Dispatch(int iteration) {
  WAFFLE_SPAN("dispatch_task", "iteration", iteration);
  waffle::Context context = waffle::ExtractContext();
  std::thread worker([context] {
    waffle::InjectContext injector(context);
    WAFFLE_SPAN("process_task", "on_worker", true);
  });
  worker.join();
}

int Rank(int rank, int fd, const std::string& dir) {
  // Rank 0 starts a trace and sends its context; rank 1 records under the same trace id.
  waffle_context_t root{};
  std::string path = dir + "/rank" + std::to_string(rank) + ".bin";
  waffle_config_t config = WAFFLE_CONFIG_INIT(path.c_str());
  config.rank = rank;
  if (rank == 1) {
    read_all(fd, &root, sizeof root);
    config.trace_id_hi = root.trace_id_hi;
    config.trace_id_lo = root.trace_id_lo;
  }
  waffle::Session session(config);
  if (!session.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, waffle::StatusString(session.status()));
    return 1;
  }
  if (rank == 0) {
    root = waffle::ExtractContext().raw();
    write_all(fd, &root, sizeof root);
  }
  CHECK(waffle::ExtractContext().raw().trace_id_lo == root.trace_id_lo);

  Comm comm{fd, rank};
  const std::size_t count = 4;
  for (int iteration = 0; iteration < 4; iteration++) {
    WAFFLE_SPAN_VAR(step, "train_step", "iteration", iteration);
    CHECK(waffle::ExtractContext().span_id() == step.id());
    std::vector<float> send(count), recv(count);
    for (std::size_t i = 0; i < count; i++) send[i] = static_cast<float>(rank * 10 + iteration);
    if (rank == 1 && iteration == 2) send[1] = NAN;  // the bug: a corrupt sample on rank 1
    AllReduce(comm, iteration, send.data(), recv.data(), count);
    Dispatch(iteration);
  }
  // A context also travels as W3C traceparent text.
  {
    waffle::Span named(std::string("named ") + std::to_string(rank), "kind", std::string_view("runtime"));
    std::string text = waffle::ExtractContext().ToTraceparent();
    CHECK(text.size() == 55);
    auto back = waffle::Context::FromTraceparent(text);
    CHECK(back && back->span_id() == named.id());
    CHECK(!waffle::Context::FromTraceparent("not a traceparent"));
    waffle::EventId e = waffle::Event("named event", "chars", text.size());
    CHECK(!e.is_null());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc == 2);
  int fds[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    close(fds[0]);
    std::exit(Rank(1, fds[1], argv[1]));
  }
  close(fds[1]);
  int rc = Rank(0, fds[0], argv[1]);
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (rc == 0) std::printf("ok\n");
  return rc;
}
