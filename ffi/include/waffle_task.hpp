// waffle_task.hpp: work that runs elsewhere keeps its place in the trace. Included by waffle.hpp.
//
//   auto f = waffle::async(std::launch::async, solve, grid);   // solve's spans nest where the
//                                                              // caller was
//   waffle::task<int> load(Pool& pool) {                       // C++20
//     WAFFLE_SPAN("load");
//     co_await pool.schedule();   // "load" stays open, and what follows nests in it,
//     co_return parse();          // on whichever thread resumes the coroutine
//   }
//   int n = waffle::sync_wait(load(pool));
//
// waffle::async(policy, f, args...) is std::async with the caller's context (its trace and
// innermost span) entered around f, on whichever thread runs it.
//
// waffle::task<T> (C++20) is a lazy coroutine: it starts when it is co_awaited or given to
// waffle::sync_wait. It keeps the context it was made in and enters it, or the innermost span it
// holds open, each time it resumes, on any thread; at each suspension it detaches its open spans
// from the thread it leaves (see waffle::detail::TaskScope), so a span opened in a task ends as
// one span wherever it ends. A task that co_awaits another passes its context on. A task
// destroyed before it completes, or ended by an exception, leaves no span open.
#ifndef WAFFLE_TASK_HPP
#define WAFFLE_TASK_HPP

#include "waffle.hpp"

#include <functional>
#include <future>
#include <tuple>
#include <type_traits>
#include <utility>

namespace waffle {

// std::async(policy, f, args...), with the caller's context entered around f where it runs.
template <class F, class... A>
auto async(std::launch policy, F&& f, A&&... args)
    -> std::future<std::invoke_result_t<std::decay_t<F>, std::decay_t<A>...>> {
  return std::async(policy,
                    [ctx = ExtractContext(), f = std::forward<F>(f),
                     args = std::make_tuple(std::forward<A>(args)...)]() mutable {
                      InjectContext here(ctx);
                      return std::apply(std::move(f), std::move(args));
                    });
}

}  // namespace waffle

#if defined(__cpp_impl_coroutine) && __has_include(<coroutine>)
#include <condition_variable>
#include <coroutine>
#include <exception>
#include <mutex>
#include <optional>

namespace waffle {

template <class T = void>
class task;

namespace detail {

// The awaiter of `a` as co_await finds it: its operator co_await (member or free), else itself.
template <class A>
decltype(auto) awaiter_of(A&& a) {
  if constexpr (requires { std::declval<A>().operator co_await(); }) {
    return std::forward<A>(a).operator co_await();
  } else if constexpr (requires { operator co_await(std::declval<A>()); }) {
    return operator co_await(std::forward<A>(a));
  } else {
    return std::forward<A>(a);
  }
}

// Any awaiter inside a task: the task leaves its thread before the awaiter may hand the
// coroutine to another thread, and enters wherever it resumes. `W` is the awaiter, or a
// reference to it.
template <class W>
struct Traced {
  W inner;
  TaskScope* scope;

  bool await_ready() { return inner.await_ready(); }
  template <class P>
  auto await_suspend(std::coroutine_handle<P> h) {
    scope->leave();
    // Nothing of this awaiter is touched after this: the coroutine may be running elsewhere.
    return inner.await_suspend(h);
  }
  decltype(auto) await_resume() {
    scope->enter();
    return inner.await_resume();
  }
};

// Waits on the calling thread for a task given to sync_wait.
struct Waiter {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
};

class PromiseBase {
 public:
  struct Start {
    TaskScope* scope;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    void await_resume() const noexcept { scope->enter(); }
  };

  struct Final {
    bool await_ready() const noexcept { return false; }
    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) const noexcept {
      PromiseBase& p = h.promise();
      p.scope_.leave();
      if (p.continuation_) return p.continuation_;
      if (Waiter* w = p.waiter_) {
        // Told under the lock: the waiter may destroy `w` once the lock is released.
        std::lock_guard<std::mutex> lock(w->mutex);
        w->done = true;
        w->done_cv.notify_all();
      }
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  Start initial_suspend() noexcept { return Start{&scope_}; }
  Final final_suspend() noexcept { return {}; }
  void unhandled_exception() noexcept { error_ = std::current_exception(); }

  // The awaiter is held as co_await would hold it: by value when made by an operator co_await,
  // else by reference to the awaitable itself, which lives until the co_await completes.
  template <class A>
  auto await_transform(A&& a) {
    using W = decltype(awaiter_of(std::forward<A>(a)));
    return Traced<W>{awaiter_of(std::forward<A>(a)), &scope_};
  }

  void rethrow_if_failed() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  template <class>
  friend class waffle::task;
  template <class T>
  friend T sync_wait_impl(task<T>&&);

  TaskScope scope_;
  std::coroutine_handle<> continuation_;
  Waiter* waiter_ = nullptr;
  std::exception_ptr error_;
};

template <class T>
class Promise : public PromiseBase {
 public:
  task<T> get_return_object() noexcept;
  template <class V>
  void return_value(V&& v) {
    value_.emplace(std::forward<V>(v));
  }
  T take() {
    rethrow_if_failed();
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
};

template <>
class Promise<void> : public PromiseBase {
 public:
  task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void take() const { rethrow_if_failed(); }
};

}  // namespace detail

// A lazy coroutine that carries its context across suspensions and threads (see the top of
// this header). Move-only; destroying it destroys the coroutine, ending its open spans.
template <class T>
class [[nodiscard]] task {
 public:
  using promise_type = detail::Promise<T>;

  task(task&& other) noexcept : h_(std::exchange(other.h_, {})) {}
  task& operator=(task&& other) noexcept {
    if (this != &other) {
      if (h_) h_.destroy();
      h_ = std::exchange(other.h_, {});
    }
    return *this;
  }
  ~task() {
    if (h_) h_.destroy();
  }

  // co_await a task: it starts, and the awaiting coroutine resumes with its result when it ends.
  auto operator co_await() && noexcept {
    struct Awaiter {
      std::coroutine_handle<promise_type> h;
      bool await_ready() const noexcept { return !h || h.done(); }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
        h.promise().continuation_ = awaiting;
        return h;
      }
      T await_resume() { return h.promise().take(); }
    };
    return Awaiter{h_};
  }

 private:
  friend promise_type;
  template <class U>
  friend U detail::sync_wait_impl(task<U>&&);

  explicit task(std::coroutine_handle<promise_type> h) noexcept : h_(h) {}

  std::coroutine_handle<promise_type> h_;
};

namespace detail {

template <class T>
task<T> Promise<T>::get_return_object() noexcept {
  return task<T>(std::coroutine_handle<Promise<T>>::from_promise(*this));
}

inline task<void> Promise<void>::get_return_object() noexcept {
  return task<void>(std::coroutine_handle<Promise<void>>::from_promise(*this));
}

template <class T>
T sync_wait_impl(task<T>&& t) {
  task<T> owned = std::move(t);
  auto h = owned.h_;
  Waiter waiter;
  h.promise().waiter_ = &waiter;
  h.resume();
  std::unique_lock<std::mutex> lock(waiter.mutex);
  waiter.done_cv.wait(lock, [&] { return waiter.done; });
  lock.unlock();
  return h.promise().take();
}

}  // namespace detail

// Runs `t` from outside any coroutine: starts it on this thread and blocks until it ends, on
// whichever thread; returns its result or throws its exception.
template <class T>
T sync_wait(task<T> t) {
  return detail::sync_wait_impl(std::move(t));
}

}  // namespace waffle

#endif  // coroutines

#endif  // WAFFLE_TASK_HPP
