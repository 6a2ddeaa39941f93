// waffle::task and waffle::async (C++20): coroutines resumed on a pool of three threads keep
// their spans open across co_await and thread hops. Records to argv[1]; the test decodes it and
// compares the tree, across threads, with the one these scenarios make:
//   pool:      8 tasks in flight at once on 3 threads, each awaiting a nested task;
//   awaited:   a task awaited by another, its value returned through sync_wait (the inner one
//              awaits an awaiter kept in a variable);
//   abandoned: a task destroyed while suspended, with spans open;
//   failed:    a task that throws after a thread hop;
//   async:     waffle::async, with the async and deferred policies.
#include <waffle.hpp>

#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <deque>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

// A pool of threads that resume coroutines posted to it, in order.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& w : workers_) w.join();
  }

  // co_await pool.schedule(): the coroutine continues on one of the pool's threads.
  auto schedule() {
    struct Hop {
      Pool* pool;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> h) { pool->post(h); }
      void await_resume() const noexcept {}
    };
    return Hop{this};
  }

  // An awaiter to keep as a variable and co_await as an lvalue: it counts its suspensions, so
  // the caller can tell that the awaiter it holds is the one that was awaited (not a copy).
  struct Counted {
    Pool* pool;
    int suspended = 0;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
      ++suspended;
      pool->post(h);
    }
    void await_resume() const noexcept {}
  };
  Counted counted() { return Counted{this}; }

  // Waits until every posted coroutine has run up to its next suspension or its end, and no
  // thread of the pool is inside one: a suspended coroutine can then be destroyed safely.
  void sync() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && busy_ == 0; });
  }

 private:
  void post(std::coroutine_handle<> h) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(h);
    }
    ready_.notify_one();
  }

  void run() {
    for (;;) {
      std::coroutine_handle<> h;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        h = queue_.front();
        queue_.pop_front();
        ++busy_;
      }
      h.resume();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --busy_;
      }
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable idle_;
  int busy_ = 0;
  std::deque<std::coroutine_handle<>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Starts a task at once and owns it until destroyed; counts down `done` when the task ends.
struct Driver {
  struct promise_type {
    Driver get_return_object() { return Driver{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  explicit Driver(std::coroutine_handle<promise_type> h) : h(h) {}
  Driver(Driver&& other) noexcept : h(std::exchange(other.h, {})) {}
  ~Driver() {
    if (h) h.destroy();
  }
  std::coroutine_handle<promise_type> h;
};

Driver drive(waffle::task<void> t, std::latch* done) {
  co_await std::move(t);
  if (done != nullptr) done->count_down();
}

// Never resumes what awaits it; counts `parked` down once it holds it.
struct Never {
  std::latch* parked;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<>) const noexcept { parked->count_down(); }
  void await_resume() const noexcept {}
};

waffle::task<int> nested(Pool& pool, int i) {
  co_await pool.schedule();
  WAFFLE_SPAN("nested", "i", i);
  co_await pool.schedule();
  WAFFLE_EVENT("leaf", "i", i);
  co_return i * 10;
}

waffle::task<void> work(Pool& pool, int i) {
  co_await pool.schedule();
  WAFFLE_SPAN("work", "i", i);
  co_await pool.schedule();
  {
    WAFFLE_SPAN("part", "i", i);
  }
  int got = co_await nested(pool, i);
  co_await pool.schedule();
  WAFFLE_EVENT("done", "i", i, "got", got);
}

waffle::task<int> inner(Pool& pool) {
  WAFFLE_SPAN("inner");
  auto hop = pool.counted();
  co_await hop;  // awaited in place: the task's wrapper holds a reference to it
  co_return hop.suspended == 1 ? 42 : -1;
}

waffle::task<int> outer(Pool& pool) {
  WAFFLE_SPAN("outer");
  int v = co_await inner(pool);
  co_await pool.schedule();
  WAFFLE_EVENT("inner returned", "v", v);
  co_return v + 1;
}

waffle::task<void> abandoned(Pool& pool, std::latch* parked) {
  WAFFLE_SPAN("abandoned");
  co_await pool.schedule();
  WAFFLE_SPAN("waiting");
  co_await Never{parked};
}

waffle::task<void> failing(Pool& pool) {
  WAFFLE_SPAN("failing");
  co_await pool.schedule();
  WAFFLE_SPAN("about to throw");
  throw std::runtime_error("boom");
}

int doubled(int x) {
  WAFFLE_SPAN("doubled", "x", x);
  return 2 * x;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  waffle::Session session(argv[1]);
  if (!session.ok()) return 3;
  int status = 0;
  {
    Pool pool(3);
    {
      WAFFLE_SPAN("pool");
      std::latch done(8);
      std::vector<Driver> drivers;
      for (int i = 0; i < 8; ++i) drivers.push_back(drive(work(pool, i), &done));
      done.wait();
      pool.sync();
    }
    {
      WAFFLE_SPAN("awaited");
      if (waffle::sync_wait(outer(pool)) != 43) status = 4;
    }
    {
      WAFFLE_SPAN("cancel");
      std::latch parked(1);
      Driver d = drive(abandoned(pool, &parked), nullptr);
      parked.wait();
      pool.sync();
      // `d` is destroyed here, and the task it awaits with it, while suspended.
    }
    {
      WAFFLE_SPAN("failed");
      try {
        waffle::sync_wait(failing(pool));
        status = 5;
      } catch (const std::runtime_error&) {
        WAFFLE_EVENT("caught");
      }
    }
    {
      WAFFLE_SPAN("async");
      auto a = waffle::async(std::launch::async, doubled, 21);
      auto d = waffle::async(std::launch::deferred, [](int x) { return doubled(x); }, 4);
      if (a.get() != 42 || d.get() != 8) status = 6;
    }
  }
  if (status == 0) std::puts("ok");
  return status;
}
