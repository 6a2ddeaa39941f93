// waffle.hpp: the C++17 API of waffle, over waffle.h. Over 400 lines because it is the whole
// C++ API in the one header a C++ program includes.
//
//   waffle::Session session("trace.bin");
//   waffle::EventId bad;
//   if (has_nan) bad = WAFFLE_EVENT("Input buffer contains NaN", "rank", rank);
//   WAFFLE_SPAN("NcclAllReduce", waffle::CausedBy(bad), "element_count", count, "rank", rank);
//
// WAFFLE_SPAN and WAFFLE_EVENT take the name, then "key", value pairs (integers, floats, bool,
// strings) mixed with waffle::CausedBy(id) and waffle::Correlate("key", value) tags and with the
// C macros' key-values, WAFFLE_KV_I64("rank", rank) and the rest, which build a waffle_kv_t here
// (C++17 has no designated initializers). Each use has a static callsite, registered on its
// first execution and cached, so later executions only encode values. WAFFLE_EVENT is a GNU
// statement expression (GCC, Clang) whose result may be ignored.
//
// EventId and SpanId convert to the C types waffle_event_id_t and waffle_span_id_t, so C code
// compiled as C++ (`waffle_event_id_t id = WAFFLE_EVENT(...)`) keeps working.
//
// waffle::Span and waffle::Event also take a run-time name; that form looks the name up on
// every call, so keep it out of hot loops. Nothing here throws.
//
// waffle_task.hpp, included at the end, adds waffle::async (a std::async that carries the
// caller's context) and, with C++20 coroutines, waffle::task<T> and waffle::sync_wait.
#ifndef WAFFLE_HPP
#define WAFFLE_HPP

#include "waffle.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace waffle {

// A span's id; default-constructed it is null.
class SpanId {
 public:
  constexpr SpanId() noexcept = default;
  constexpr explicit SpanId(waffle_span_id_t raw) noexcept : raw_(raw) {}
  constexpr waffle_span_id_t raw() const noexcept { return raw_; }
  // For C code compiled as C++, which keeps ids in the C type.
  constexpr operator waffle_span_id_t() const noexcept { return raw_; }
  constexpr std::uint64_t value() const noexcept { return raw_.id; }
  constexpr bool is_null() const noexcept { return raw_.id == 0; }
  constexpr explicit operator bool() const noexcept { return !is_null(); }
  friend constexpr bool operator==(SpanId a, SpanId b) noexcept { return a.raw_.id == b.raw_.id; }
  friend constexpr bool operator!=(SpanId a, SpanId b) noexcept { return !(a == b); }

 private:
  waffle_span_id_t raw_{0};
};

// An event's id; default-constructed it is null.
class EventId {
 public:
  constexpr EventId() noexcept = default;
  constexpr explicit EventId(waffle_event_id_t raw) noexcept : raw_(raw) {}
  constexpr waffle_event_id_t raw() const noexcept { return raw_; }
  // For C code compiled as C++: `waffle_event_id_t cause = WAFFLE_EVENT(...)`.
  constexpr operator waffle_event_id_t() const noexcept { return raw_; }
  constexpr std::uint64_t value() const noexcept { return raw_.id; }
  constexpr bool is_null() const noexcept { return raw_.id == 0; }
  constexpr explicit operator bool() const noexcept { return !is_null(); }
  friend constexpr bool operator==(EventId a, EventId b) noexcept { return a.raw_.id == b.raw_.id; }
  friend constexpr bool operator!=(EventId a, EventId b) noexcept { return !(a == b); }

 private:
  waffle_event_id_t raw_{0};
};

// Marks a span or event as caused by another (of any thread or process). Null ids are skipped.
struct CausedBy {
  constexpr explicit CausedBy(SpanId id) noexcept : id(id.value()) {}
  constexpr explicit CausedBy(EventId id) noexcept : id(id.value()) {}
  constexpr explicit CausedBy(waffle_span_id_t id) noexcept : id(id.id) {}
  constexpr explicit CausedBy(waffle_event_id_t id) noexcept : id(id.id) {}
  std::uint64_t id;
};

// Puts a span or event in the correlation group (key, value), e.g. ("allreduce", seq), which
// ties together the same operation on every rank. The key should be a string literal. A key
// ending in '>' marks a cause and one ending in '<' an effect: with the same stem and value,
// every effect was caused by every cause (a message's send "msg>" and receive "msg<").
struct Correlate {
  constexpr Correlate(const char* key, std::uint64_t value) noexcept : key(key), value(value) {}
  const char* key;
  std::uint64_t value;
};

namespace detail {

template <class T>
inline constexpr bool is_tag_v = std::is_same_v<T, CausedBy> || std::is_same_v<T, Correlate>;

// A waffle_kv_t (from a WAFFLE_KV_* macro) is one key-value as it is.
template <class T>
inline constexpr bool is_item_v = is_tag_v<T> || std::is_same_v<T, waffle_kv_t>;

template <class T>
inline constexpr bool always_false_v = false;

// Key-values in an argument list: a tag or a waffle_kv_t is one, a "key", value pair is one.
template <class... A>
constexpr std::size_t kv_count();

template <class V, class... R>
constexpr std::size_t kv_count_after_value();

template <class T, class... R>
constexpr std::size_t kv_count_from() {
  if constexpr (is_item_v<std::decay_t<T>>) {
    return 1 + kv_count<R...>();
  } else {
    static_assert(sizeof...(R) > 0, "waffle: a key without a value (give \"key\", value pairs)");
    if constexpr (sizeof...(R) == 0) {
      return 1;
    } else {
      return 1 + kv_count_after_value<R...>();
    }
  }
}

template <class V, class... R>
constexpr std::size_t kv_count_after_value() {
  return kv_count<R...>();
}

template <class... A>
constexpr std::size_t kv_count() {
  if constexpr (sizeof...(A) == 0) {
    return 0;
  } else {
    return kv_count_from<A...>();
  }
}

inline waffle_kv_t kv_cause(std::uint64_t id) noexcept {
  waffle_kv_t kv{};
  kv.kind = WAFFLE_KV_KIND_CAUSE;
  kv.value.u64 = id;
  return kv;
}

inline waffle_kv_t kv_correlate(const Correlate& c) noexcept {
  waffle_kv_t kv{};
  kv.key = c.key;
  kv.kind = WAFFLE_KV_KIND_CORRELATE;
  kv.value.u64 = c.value;
  return kv;
}

template <class V>
waffle_kv_t kv_value(const char* key, const V& v) noexcept {
  using D = std::decay_t<V>;
  waffle_kv_t kv{};
  kv.key = key;
  if constexpr (std::is_same_v<D, bool>) {
    kv.kind = WAFFLE_KV_KIND_BOOL;
    kv.value.u64 = v ? 1 : 0;
  } else if constexpr (std::is_enum_v<D>) {
    return kv_value(key, static_cast<std::underlying_type_t<D>>(v));
  } else if constexpr (std::is_integral_v<D> && std::is_signed_v<D>) {
    kv.kind = WAFFLE_KV_KIND_I64;
    kv.value.i64 = static_cast<std::int64_t>(v);
  } else if constexpr (std::is_integral_v<D>) {
    kv.kind = WAFFLE_KV_KIND_U64;
    kv.value.u64 = static_cast<std::uint64_t>(v);
  } else if constexpr (std::is_floating_point_v<D>) {
    kv.kind = WAFFLE_KV_KIND_F64;
    kv.value.f64 = static_cast<double>(v);
  } else if constexpr (std::is_same_v<D, const char*> || std::is_same_v<D, char*>) {
    kv.kind = WAFFLE_KV_KIND_STR;
    kv.len = WAFFLE_STRLEN_NUL;  // the library bounds the scan
    kv.value.str = v;
  } else if constexpr (std::is_convertible_v<const D&, std::string_view>) {
    std::string_view s = v;
    kv.kind = WAFFLE_KV_KIND_STR;
    kv.len = static_cast<std::uint32_t>(s.size() < 4096 ? s.size() : 4096);
    kv.value.str = s.data();
  } else {
    static_assert(always_false_v<D>, "waffle field values are integers, floats, bool and strings");
  }
  return kv;
}

// The WAFFLE_KV_* macros' key-values in C++; the same kinds and values as C's initializers.
inline waffle_kv_t kv_strn(const char* key, const char* s, std::uint32_t len) noexcept {
  waffle_kv_t kv{};
  kv.key = key;
  kv.kind = WAFFLE_KV_KIND_STR;
  kv.len = len;
  kv.value.str = s;
  return kv;
}
// Only a span id (or SpanId) is a span cause and only an event id (or EventId) an event cause,
// as in C.
inline waffle_kv_t kv_cause_span(waffle_span_id_t id) noexcept { return kv_cause(id.id); }
inline waffle_kv_t kv_cause_event(waffle_event_id_t id) noexcept { return kv_cause(id.id); }

inline void fill(waffle_kv_t*) noexcept {}

template <class... R>
void fill(waffle_kv_t* out, const waffle_kv_t& kv, const R&... rest) noexcept;
template <class... R>
void fill(waffle_kv_t* out, const CausedBy& c, const R&... rest) noexcept;
template <class... R>
void fill(waffle_kv_t* out, const Correlate& c, const R&... rest) noexcept;
template <class V, class... R>
void fill(waffle_kv_t* out, const char* key, const V& v, const R&... rest) noexcept;

template <class... R>
void fill(waffle_kv_t* out, const waffle_kv_t& kv, const R&... rest) noexcept {
  *out = kv;
  fill(out + 1, rest...);
}

template <class... R>
void fill(waffle_kv_t* out, const CausedBy& c, const R&... rest) noexcept {
  *out = kv_cause(c.id);
  fill(out + 1, rest...);
}

template <class... R>
void fill(waffle_kv_t* out, const Correlate& c, const R&... rest) noexcept {
  *out = kv_correlate(c);
  fill(out + 1, rest...);
}

template <class V, class... R>
void fill(waffle_kv_t* out, const char* key, const V& v, const R&... rest) noexcept {
  *out = kv_value(key, v);
  fill(out + 1, rest...);
}

// The key-values of an argument list, on the stack.
template <class... A>
std::array<waffle_kv_t, kv_count<A...>()> kvs(const A&... args) noexcept {
  std::array<waffle_kv_t, kv_count<A...>()> out;
  fill(out.data(), args...);
  return out;
}

inline std::uint32_t name_len(std::string_view name) noexcept {
  return static_cast<std::uint32_t>(name.size() < 4096 ? name.size() : 4096);
}

// The static callsite of a macro use (distinguishes the macros' constructor), and the calling
// thread's cache slot of the translation unit (see waffle_span_begin_t).
struct MacroSite {
  waffle_callsite_t& callsite;
  void** thread;
};

}  // namespace detail

class Span;

namespace detail {

// What a waffle::task's coroutine (waffle_task.hpp) holds while it exists: the context it was
// made in, the spans it opened and has not ended (innermost first, linked through the spans),
// and the context it entered on the thread that runs it. While a task runs on a thread it is
// that thread's current_task, and every Span made there joins it. When the task suspends, its
// open spans are detached from the thread (waffle_span_detach) and the context is left; when it
// resumes, on whatever thread, its innermost open span (else its context) is entered there. A
// detached span ends by id on whichever thread ends it.
class TaskScope {
 public:
  TaskScope() noexcept : context_(waffle_context_current()) {}
  TaskScope(const TaskScope&) = delete;
  TaskScope& operator=(const TaskScope&) = delete;

  // The task runs on this thread from now on (a resumption); does nothing if it already does.
  void enter() noexcept;
  // The task stops running on this thread (a suspension, or its end).
  void leave() noexcept;
  // A span made while the task runs joins it.
  void opened(Span& span) noexcept;
  // A span that joined the task ends (on whatever thread, the task running or not).
  void ended(Span& span) noexcept;

 private:
  void enter_innermost() noexcept;

  waffle_context_t context_;
  Span* open_ = nullptr;
  waffle_context_guard_t entered_{};
  TaskScope* outer_ = nullptr;
  bool running_ = false;
};

// The task running on this thread, if any.
inline thread_local TaskScope* current_task = nullptr;

}  // namespace detail

// An open span, ended when the object is destroyed (on the thread that made it; one made inside
// a waffle::task may end on another thread, after the task moved there).
class Span {
 public:
  // A span at a static callsite of your own (see waffle_callsite_t): "key", value pairs and tags.
  template <class... A>
  explicit Span(waffle_callsite_t& callsite, const A&... args) noexcept {
    auto kv = detail::kvs(args...);
    raw_ = waffle_span_begin(&callsite, kv.data(), kv.size());
    join_task();
  }

  // A span named at run time (one registry lookup per call).
  template <class... A>
  explicit Span(std::string_view name, const A&... args) noexcept {
    auto kv = detail::kvs(args...);
    raw_ = waffle_span_begin_named(name.data(), detail::name_len(name), kv.data(), kv.size());
    join_task();
  }

  // What WAFFLE_SPAN expands to: the name is already in the callsite; the thread's state is
  // reached through the translation unit's own cache (a fixed offset from the thread pointer)
  // rather than the library's thread-local.
  template <class... A>
  Span(detail::MacroSite site, const char* /*name*/, const A&... args) noexcept : thread_(site.thread) {
    auto kv = detail::kvs(args...);
    raw_ = waffle_span_begin_t(thread_, &site.callsite, kv.data(), kv.size());
    join_task();
  }

  ~Span() {
    if (task_ != nullptr) {
      task_->ended(*this);
    } else {
      waffle_span_end_t(thread_, &raw_);
    }
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  // The span's id (null if it was not recorded), for CausedBy and contexts.
  SpanId id() const noexcept { return SpanId(raw_.id); }

 private:
  friend class detail::TaskScope;

  void join_task() noexcept {
    if (raw_.id.id != 0 && detail::current_task != nullptr) detail::current_task->opened(*this);
  }

  waffle_span_t raw_{};
  // The cache slot of the thread that began it (macro spans), else null.
  void** thread_ = nullptr;
  // The task it joined, and the task's next span out.
  detail::TaskScope* task_ = nullptr;
  Span* outer_ = nullptr;
  bool detached_ = false;
};

namespace detail {

inline void TaskScope::enter_innermost() noexcept {
  waffle_context_t ctx = context_;
  if (open_ != nullptr) ctx.span_id = open_->raw_.id;
  entered_ = waffle_context_enter(&ctx);
}

inline void TaskScope::enter() noexcept {
  if (running_) return;
  running_ = true;
  outer_ = current_task;
  current_task = this;
  enter_innermost();
}

inline void TaskScope::leave() noexcept {
  if (!running_) return;
  // Spans opened since the task last resumed are innermost; older ones are detached already.
  for (Span* s = open_; s != nullptr && !s->detached_; s = s->outer_) {
    waffle_span_detach(&s->raw_);
    s->detached_ = true;
  }
  waffle_context_exit(&entered_);
  current_task = outer_;
  outer_ = nullptr;
  running_ = false;
}

inline void TaskScope::opened(Span& span) noexcept {
  span.task_ = this;
  span.outer_ = open_;
  open_ = &span;
}

inline void TaskScope::ended(Span& span) noexcept {
  Span** at = &open_;
  while (*at != nullptr && *at != &span) at = &(*at)->outer_;
  if (*at != nullptr) *at = span.outer_;
  if (!span.detached_) {
    waffle_span_end(&span.raw_);
  } else if (running_ && current_task == this) {
    // It is the span entered here: leave it, end it by id, enter the one around it.
    waffle_context_exit(&entered_);
    waffle_span_end(&span.raw_);
    enter_innermost();
  } else {
    waffle_span_end(&span.raw_);
  }
}

}  // namespace detail

// Records an event at a static callsite of your own; returns its id.
template <class... A>
[[nodiscard]] EventId Event(waffle_callsite_t& callsite, const A&... args) noexcept {
  auto kv = detail::kvs(args...);
  return EventId(waffle_event(&callsite, kv.data(), kv.size()));
}

// Records an event named at run time (one registry lookup per call); returns its id.
template <class... A>
[[nodiscard]] EventId Event(std::string_view name, const A&... args) noexcept {
  auto kv = detail::kvs(args...);
  return EventId(waffle_event_named(name.data(), detail::name_len(name), kv.data(), kv.size()));
}

namespace detail {
// What WAFFLE_EVENT expands to; its result may be ignored.
template <class... A>
EventId event_at(waffle_callsite_t& callsite, const char* /*name*/, const A&... args) noexcept {
  auto kv = kvs(args...);
  return EventId(waffle_event(&callsite, kv.data(), kv.size()));
}
}  // namespace detail

// A trace id and a span: what work on another thread or process belongs to.
class Context {
 public:
  constexpr Context() noexcept = default;
  constexpr explicit Context(waffle_context_t raw) noexcept : raw_(raw) {}
  constexpr const waffle_context_t& raw() const noexcept { return raw_; }
  constexpr SpanId span_id() const noexcept { return SpanId(raw_.span_id); }
  constexpr bool is_null() const noexcept { return raw_.span_id.id == 0; }

  // The W3C traceparent text, or "" for a context without a trace or span id.
  std::string ToTraceparent() const {
    char buf[WAFFLE_TRACEPARENT_LEN];
    if (waffle_context_to_traceparent(&raw_, buf, sizeof buf) != WAFFLE_OK) return std::string();
    return std::string(buf);
  }

  // Reads a W3C traceparent; nullopt if it is not one.
  static std::optional<Context> FromTraceparent(const char* text) noexcept {
    waffle_context_t raw{};
    if (waffle_context_from_traceparent(text, &raw) != WAFFLE_OK) return std::nullopt;
    return Context(raw);
  }
  static std::optional<Context> FromTraceparent(const std::string& text) noexcept {
    return FromTraceparent(text.c_str());
  }

 private:
  waffle_context_t raw_{};
};

// This thread's context: the trace and the innermost open span.
inline Context ExtractContext() noexcept { return Context(waffle_context_current()); }

// Makes a context's span the parent of what this thread records while the object lives.
class InjectContext {
 public:
  explicit InjectContext(const Context& ctx) noexcept : guard_(waffle_context_enter(&ctx.raw())) {}
  ~InjectContext() { waffle_context_exit(&guard_); }
  InjectContext(const InjectContext&) = delete;
  InjectContext& operator=(const InjectContext&) = delete;

 private:
  waffle_context_guard_t guard_;
};

// Records to a file while the object lives (waffle_start / waffle_stop).
class Session {
 public:
  explicit Session(const char* path) noexcept : status_(waffle_start(path)) {}
  explicit Session(const waffle_config_t& config) noexcept : status_(waffle_start_with(&config)) {}
  ~Session() {
    if (status_ == WAFFLE_OK) waffle_stop();
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // WAFFLE_OK if recording started.
  waffle_status_t status() const noexcept { return status_; }
  bool ok() const noexcept { return status_ == WAFFLE_OK; }

 private:
  waffle_status_t status_;
};

// A static English description of a status.
inline const char* StatusString(waffle_status_t status) noexcept { return waffle_status_str(status); }

}  // namespace waffle

// The original examples' spelling (Waffle::EventId, Waffle::CausedBy).
namespace Waffle = waffle;

// This thread's handle to its recording state, cached by waffle_span_begin_t on first use: one
// per translation unit (internal linkage), named only by the macros' expansions.
[[maybe_unused]] static thread_local void* waffle__cxx_thread = nullptr;

#define WAFFLE__CAT_(a, b) a##b
#define WAFFLE__CAT(a, b) WAFFLE__CAT_(a, b)
#define WAFFLE__HEAD(...) WAFFLE__HEAD_(__VA_ARGS__, ~)
#define WAFFLE__HEAD_(first, ...) first
#define WAFFLE__CALLSITE_CXX(name_) \
  { (name_), __func__, __FILE__, static_cast<std::uint32_t>(__LINE__), 0 }

// WAFFLE_SPAN(name, args...): a waffle::Span until the end of the enclosing block.
#define WAFFLE_SPAN(...) WAFFLE_SPAN_VAR(WAFFLE__CAT(waffle__span_, __COUNTER__), __VA_ARGS__)

// WAFFLE_SPAN_VAR(var, name, args...): WAFFLE_SPAN as the waffle::Span `var` (for var.id()).
#define WAFFLE_SPAN_VAR(var, ...)                                                              \
  static waffle_callsite_t WAFFLE__CAT(var, _callsite) =                                      \
      WAFFLE__CALLSITE_CXX(WAFFLE__HEAD(__VA_ARGS__));                                         \
  ::waffle::Span var(::waffle::detail::MacroSite{WAFFLE__CAT(var, _callsite), &waffle__cxx_thread}, \
                     __VA_ARGS__)

// WAFFLE_EVENT(name, args...): records an event; evaluates to its waffle::EventId, which may be
// ignored.
#define WAFFLE_EVENT(...) WAFFLE__EVENT_CXX(WAFFLE__CAT(waffle__event_, __COUNTER__), __VA_ARGS__)
#define WAFFLE__EVENT_CXX(var, ...)                                                            \
  (__extension__({                                                                             \
    static waffle_callsite_t var = WAFFLE__CALLSITE_CXX(WAFFLE__HEAD(__VA_ARGS__));            \
    ::waffle::detail::event_at(var, __VA_ARGS__);                                              \
  }))

// WAFFLE_STEP(n): a step span ("step", its first field "step" the number n) until the end of
// the enclosing block.
#define WAFFLE_STEP(n) WAFFLE_SPAN("step", "step", static_cast<std::uint64_t>(n))

// The C macros' key-values (see waffle_macros.h), as waffle_kv_t values for the macros above:
// WAFFLE_SPAN("op", WAFFLE_KV_CAUSE_EVENT(cause), "count", n, WAFFLE_KV_I64("rank", rank)).
#define WAFFLE_KV_I64(key_, v_) ::waffle::detail::kv_value((key_), static_cast<std::int64_t>(v_))
#define WAFFLE_KV_U64(key_, v_) ::waffle::detail::kv_value((key_), static_cast<std::uint64_t>(v_))
#define WAFFLE_KV_F64(key_, v_) ::waffle::detail::kv_value((key_), static_cast<double>(v_))
#define WAFFLE_KV_BOOL(key_, v_) ::waffle::detail::kv_value((key_), static_cast<bool>(v_))
#define WAFFLE_KV_STR(key_, s_) \
  ::waffle::detail::kv_strn((key_), static_cast<const char*>(s_), WAFFLE_STRLEN_NUL)
#define WAFFLE_KV_STRN(key_, s_, n_) \
  ::waffle::detail::kv_strn((key_), static_cast<const char*>(s_), static_cast<std::uint32_t>(n_))
#define WAFFLE_KV_CAUSE_SPAN(id_) ::waffle::detail::kv_cause_span(id_)
#define WAFFLE_KV_CAUSE_EVENT(id_) ::waffle::detail::kv_cause_event(id_)
#define WAFFLE_KV_CORRELATE(key_, v_) \
  ::waffle::detail::kv_correlate(::waffle::Correlate((key_), static_cast<std::uint64_t>(v_)))

#include "waffle_task.hpp"

#endif  // WAFFLE_HPP
