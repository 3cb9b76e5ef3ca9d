// parenchyma SDK, C++ side: what every plugin needs around the C ABI — exceptions that become
// pcy_error objects (the firewall), a logging bridge to the host, and size gates.
// Header-only; a plugin includes this (through framework.hpp / bundle.hpp) and links nothing.
#pragma once

#include <parenchyma/abi/pcy_base.h>
#include <parenchyma/sdk/dtype.hpp>
#include <parenchyma/sdk/os.hpp>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace parenchyma::sdk {

// Thrown inside plugin code; the firewall turns it into a pcy_error with this code.
class error : public std::runtime_error {
public:
  error(pcy_status code, const std::string& message) : std::runtime_error(message), code_(code) {}
  pcy_status code() const noexcept { return code_; }

private:
  pcy_status code_;
};

[[noreturn]] inline void fail(pcy_status code, const std::string& message) {
  throw error(code, message);
}

namespace detail {
// A piece of a message as streamed: a null C string reads "(null)" (streaming a null char
// pointer is undefined: libstdc++ sets badbit and drops the rest of the message).
template <class P> decltype(auto) piece(P&& p) {
  using D = std::decay_t<P>;
  if constexpr (std::is_pointer_v<D> &&
                (std::is_same_v<std::remove_cv_t<std::remove_pointer_t<D>>, char> ||
                 std::is_same_v<std::remove_cv_t<std::remove_pointer_t<D>>, signed char> ||
                 std::is_same_v<std::remove_cv_t<std::remove_pointer_t<D>>, unsigned char>)) {
    const D q = p; // a string literal decays here
    return q != nullptr ? reinterpret_cast<const char*>(q) : static_cast<const char*>("(null)");
  } else {
    return std::forward<P>(p);
  }
}
} // namespace detail

// Builds a message from pieces: sdk::str("bad size ", n, " for ", name).
template <class... A> std::string str(A&&... parts) {
  std::ostringstream os;
  (os << ... << detail::piece(std::forward<A>(parts)));
  return os.str();
}

// A framework's memory_copy within one buffer: the source and destination ranges must not
// overlap (a device copy engine does not order the bytes of an overlapping copy).
inline void refuse_overlap_in_one_buffer(bool same_buffer, uint64_t src_offset,
                                         uint64_t dst_offset, uint64_t bytes) {
  if (same_buffer && src_offset < dst_offset + bytes && dst_offset < src_offset + bytes)
    fail(PCY_ERR_INVALID_ARGUMENT,
         str("memory_copy: source [", src_offset, ", ", src_offset + bytes, ") and destination [",
             dst_offset, ", ", dst_offset + bytes, ") overlap in one buffer"));
}

namespace detail {
struct error_block {
  pcy_error err;
  // message and origin follow in the same allocation
};
inline void destroy_error(pcy_error* e) noexcept { std::free(e); }
} // namespace detail

// Makes a pcy_error the caller frees with err->destroy(err). One allocation; never throws:
// if memory is exhausted it returns a static error that destroys to nothing.
inline pcy_error* make_error(pcy_status code, std::string_view message,
                             std::string_view origin) noexcept {
  const size_t need = sizeof(pcy_error) + message.size() + 1 + origin.size() + 1;
  auto* raw = static_cast<char*>(std::malloc(need));
  if (raw == nullptr) {
    static char msg[] = "out of host memory while reporting an error";
    static char org[] = "sdk";
    static pcy_error oom{sizeof(pcy_error), nullptr, PCY_ERR_OUT_OF_MEMORY, msg, org,
                         [](pcy_error*) {}};
    return &oom;
  }
  auto* e = reinterpret_cast<pcy_error*>(raw);
  char* m = raw + sizeof(pcy_error);
  char* o = m + message.size() + 1;
  std::memcpy(m, message.data(), message.size());
  m[message.size()] = '\0';
  std::memcpy(o, origin.data(), origin.size());
  o[origin.size()] = '\0';
  e->struct_size = sizeof(pcy_error);
  e->ext = nullptr;
  e->code = code;
  e->message = m;
  e->origin = o;
  e->destroy = &detail::destroy_error;
  return e;
}

// The exception firewall: runs f and turns any exception into a pcy_error naming `origin`.
template <class F> pcy_error* guard(const char* origin, F&& f) noexcept {
  try {
    std::forward<F>(f)();
    return nullptr;
  } catch (const error& e) {
    return make_error(e.code(), e.what(), origin);
  } catch (const std::bad_alloc&) {
    return make_error(PCY_ERR_OUT_OF_MEMORY, "host memory exhausted", origin);
  } catch (const std::exception& e) {
    return make_error(PCY_ERR_INTERNAL, str("unexpected exception: ", e.what()), origin);
  } catch (...) {
    return make_error(PCY_ERR_INTERNAL, "unexpected non-standard exception", origin);
  }
}

// Size gates, per field as pcy_base.h promises: a receiver needs the fields of the minor it
// reads, no more. `min_struct_size<T>` is the pin of the last minor whose fields the SDK reads
// unconditionally (later fields are read only behind PCY_HAS_FIELD); a struct without a pin does
// not compile here.
template <class T> inline constexpr size_t min_struct_size = 0; // specialised per struct
template <> inline constexpr size_t min_struct_size<pcy_host_services> = PCY_HOST_SERVICES_SIZE_1_0;
template <> inline constexpr size_t min_struct_size<pcy_memory_handle> = PCY_MEMORY_HANDLE_SIZE_1_0;
template <> inline constexpr size_t min_struct_size<pcy_tensor> = PCY_TENSOR_SIZE_1_0;

[[noreturn]] [[gnu::noinline]] [[gnu::cold]] inline void
struct_too_small(size_t struct_size, size_t needed, const char* what) {
  if (struct_size == 0 && needed == 0) fail(PCY_ERR_INVALID_ARGUMENT, str(what, ": NULL"));
  fail(PCY_ERR_INVALID_ARGUMENT, str(what, ": struct_size ", struct_size, " is smaller than the ",
                                     needed, " bytes of its ABI 1.0 fields"));
}
inline void require_size(size_t struct_size, size_t needed, const char* what) {
  if (struct_size < needed) [[unlikely]]
    struct_too_small(struct_size, needed, what);
}
// Inlined into every entry point: two compares on the way in, the message only on failure.
template <class T> [[gnu::always_inline]] inline void require_struct(const T* s, const char* what) {
  static_assert(min_struct_size<T> > 0, "no ABI size pin for this struct (see pcy_*.h)");
  if (s == nullptr) [[unlikely]]
    struct_too_small(0, 0, what);
  require_size(s->struct_size, min_struct_size<T>, what);
}

// The logging bridge: plugins never print; messages go to the host's callback.
class logger {
public:
  logger() = default;
  logger(const pcy_host_services* host, const char* origin) : host_(host), origin_(origin) {}

  bool enabled(pcy_log_level level) const noexcept {
    return host_ != nullptr && host_->log != nullptr && level >= host_->log_level;
  }
  void log(pcy_log_level level, const std::string& message) const noexcept {
    if (enabled(level)) host_->log(host_->log_user, level, origin_, message.c_str());
  }
  template <class... A> void trace(A&&... a) const { emit(PCY_LOG_TRACE, std::forward<A>(a)...); }
  template <class... A> void debug(A&&... a) const { emit(PCY_LOG_DEBUG, std::forward<A>(a)...); }
  template <class... A> void info(A&&... a) const { emit(PCY_LOG_INFO, std::forward<A>(a)...); }
  template <class... A> void warn(A&&... a) const { emit(PCY_LOG_WARN, std::forward<A>(a)...); }
  template <class... A> void error(A&&... a) const { emit(PCY_LOG_ERROR, std::forward<A>(a)...); }
  // A step of slow work the host waits for (1.4 host service; nothing on an older host).
  void progress(const std::string& step) const noexcept {
    if (host_ != nullptr && PCY_HAS_FIELD(host_, pcy_host_services, progress_user) &&
        host_->progress != nullptr)
      host_->progress(host_->progress_user, step.c_str());
  }

private:
  template <class... A> void emit(pcy_log_level level, A&&... a) const {
    if (enabled(level)) log(level, str(std::forward<A>(a)...));
  }
  const pcy_host_services* host_ = nullptr;
  const char* origin_ = "plugin";
};

// What a program source compiles, for a progress step: its first kernel's name and how many
// more it has ("softmax_rows (and 5 more kernels)"), from OpenCL C (`__kernel`/`kernel`) or CUDA
// C (`__global__`) declarations; "a program" when none is found.
inline std::string kernels_in(std::string_view source) {
  std::string first;
  size_t count = 0;
  for (const std::string_view tag :
       {std::string_view("__kernel"), std::string_view("__global__"), std::string_view("kernel")}) {
    for (size_t at = source.find(tag); at != std::string_view::npos;
         at = source.find(tag, at + tag.size())) {
      const bool starts = at == 0 || !(std::isalnum(static_cast<unsigned char>(source[at - 1])) ||
                                       source[at - 1] == '_');
      const size_t end = at + tag.size();
      if (!starts || end >= source.size() || !std::isspace(static_cast<unsigned char>(source[end])))
        continue;
      // The name: the identifier before the parameter list's '(' (past __launch_bounds__(...)).
      size_t from = end, name_begin = 0, name_end = 0;
      for (;;) {
        const size_t paren = source.find('(', from);
        if (paren == std::string_view::npos) break;
        name_end = paren;
        while (name_end > from && std::isspace(static_cast<unsigned char>(source[name_end - 1])))
          --name_end;
        name_begin = name_end;
        while (name_begin > from &&
               (std::isalnum(static_cast<unsigned char>(source[name_begin - 1])) ||
                source[name_begin - 1] == '_'))
          --name_begin;
        if (source.substr(name_begin, name_end - name_begin) != "__launch_bounds__") break;
        const size_t close = source.find(')', paren);
        if (close == std::string_view::npos) break;
        from = close + 1;
      }
      if (name_begin == name_end) continue;
      ++count;
      // A name pasted by a macro (NAME##_fwd) is not the kernel's: only plain names are shown.
      if (first.empty() && (name_begin == 0 || source[name_begin - 1] != '#'))
        first = std::string(source.substr(name_begin, name_end - name_begin));
    }
    if (count > 0) break; // one dialect per source
  }
  if (count == 0) return "a program";
  if (first.empty()) return str("a program of ", count, " kernel", count > 1 ? "s" : "");
  if (count == 1) return first;
  return str(first, " (and ", count - 1, " more kernel", count > 2 ? "s" : "", ")");
}

// Checks the host's ABI at initialisation: same major, any minor.
inline void check_host_abi(const pcy_host_services* host, const char* plugin) {
  require_struct(host, "pcy_host_services");
  if (host->host_abi_major != PCY_ABI_VERSION_MAJOR)
    fail(PCY_ERR_VERSION,
         str("plugin '", plugin, "' speaks ABI ", PCY_ABI_VERSION_MAJOR, ".", PCY_ABI_VERSION_MINOR,
             " but the host speaks ", host->host_abi_major, ".", host->host_abi_minor,
             ": use a plugin built against this host's SDK"));
}

// Where a plugin reads its settings: the one reader of the host's setting service (1.1). Made
// from the host's services (what plugins do): the environment variable, else the config's
// "settings", with the host's rules (set-uid, replaced environments); a 1.0 host offers none, and
// then nothing is set, rather than a getenv that would break those rules. Default-constructed
// (code that runs without a host: a plugin's own tests and benchmarks, the tools): the process
// environment, ignored in set-uid processes. Cheap to copy; every member may be called from any
// thread.
class settings {
public:
  settings() = default;
  explicit settings(const pcy_host_services* host) noexcept : host_(host), hosted_(true) {}
  // The value, or nullptr when unset or empty. The string belongs to the host (until shutdown)
  // or to the environment.
  const char* find(const char* name) const noexcept {
    const char* v = nullptr;
    if (!hosted_)
      v = os::secure_getenv(name);
    else if (host_ != nullptr && PCY_HAS_FIELD(host_, pcy_host_services, setting_user) &&
             host_->setting != nullptr)
      v = host_->setting(host_->setting_user, name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  }
  // The value, or "" when unset.
  std::string get(const char* name) const {
    const char* v = find(name);
    return v != nullptr ? std::string(v) : std::string();
  }

private:
  const pcy_host_services* host_ = nullptr;
  bool hosted_ = false;
};

} // namespace parenchyma::sdk
