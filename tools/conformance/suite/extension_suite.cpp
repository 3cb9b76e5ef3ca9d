// parenchyma-conformance: the base of the extension suites (extension_suite.hpp).
#include "extension_suite.hpp"

#include <cstdio>
#include <utility>
#include <variant>

namespace parenchyma::conformance {

namespace {

// The device's boolean property `key`; `absent` when the plugin does not report it.
bool device_flag(const Device& d, const char* key, bool absent) {
  for (const auto& [k, v] : d.properties)
    if (k == key) {
      if (const bool* b = std::get_if<bool>(&v)) return *b;
      if (const int64_t* i = std::get_if<int64_t>(&v)) return *i != 0;
      return absent;
    }
  return absent;
}

bool is_half_dtype(pcy_dtype d) { return d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16; }

// Why a cell's op is not served here, with what makes the cell optional.
std::string with_need(std::string why, const dtype_need& need) {
  return need.optional ? str(why, " (optional here: ", need.why, ")") : why;
}

std::string fell_back(const extension_target& st) {
  return str("an op of this case ran on another framework by fallback: ", st.bundles,
             " does not serve it on ", st.framework);
}

// One cell on the target's backend: served here, or skipped (failed under --require-ops where
// its dtype is required) with the reason.
void run_cell(extension_target& st, uint64_t& optional_fallbacks, pcy_dtype dtype,
              const std::vector<const OpKey*>& keys, const extension_suite::body& f) {
  if (!st.backend) skip("no backend (the suite was not set up)");
  const Backend& b = *st.backend;
  const dtype_need need = need_of(st, dtype);
  const bool strict = st.required && !need.optional;
  // An optional cell runs only where this framework's bundle serves every op it names (not on
  // another framework by fallback); a required one runs, and is judged by what happened.
  if (need.optional)
    for (const OpKey* k : keys) {
      OpRoute r;
      try {
        r = b.route(*k);
      } catch (const parenchyma::error& e) {
        if (e.code() != errc::unsupported) throw;
        skip(with_need(str("not served here: ", e.what()), need));
      }
      if (r.framework != st.framework || r.fallback)
        skip(with_need(str(k->extension, ".", k->name, " routes to ", r.framework, " (", r.bundle,
                           ") by fallback: ", st.bundles, " does not serve it on ", st.framework),
                       need));
    }
  const uint64_t before = b.fallback_count();
  set_f32_flush_rule(st.flush_f32 && dtype == PCY_DTYPE_F32);
  try {
    f(b);
  } catch (const parenchyma::error& e) {
    if (e.code() == errc::unsupported && !strict)
      skip(with_need(str("not served here: ", e.what()), need));
    throw;
  }
  if (const uint64_t n = b.fallback_count() - before; n != 0) {
    const std::string why = fell_back(st);
    if (need.optional) optional_fallbacks += n;
    if (strict) fail_check(why);
    skip(with_need(why, need));
  }
}

// The first case: every op of every dtype routes to this framework's bundle (no fallback); the
// optional dtypes are reported in notes.
void routes(const extension_target& st, const extension_suite::keys_of& keys_of) {
  const Backend& b = *st.backend;
  note(str(st.extension, " on ", b.name(), " (", b.device().name, "), bundle ", st.bundles));
  if (st.flush_f32)
    note("this device may flush f32 subnormals (denorm_preserve_f32 is not true): the f32 cells "
         "are held to the f32 flush rule (docs/vulkan.md)");
  int served = 0;
  for (const pcy_dtype d : {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_F16, PCY_DTYPE_BF16,
                            PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8}) {
    const std::vector<const OpKey*> keys = keys_of(d);
    if (keys.empty()) continue;
    const char* dn = ext::dtype_name(d);
    const dtype_need need = need_of(st, d);
    const bool strict = st.required && !need.optional;
    int here_count = 0;
    for (const OpKey* k : keys) {
      const std::string cell = str(k->extension, ".", k->name, " ", dn);
      OpRoute r;
      try {
        r = b.route(*k);
      } catch (const parenchyma::error& e) {
        if (strict)
          fail_check(str(cell, " is not served here: ", e.what()));
        else if (!is_half_dtype(d))
          note(str(cell, ": not served here (its cases are skipped): ", with_need(e.what(), need)));
        continue;
      }
      const bool here = r.framework == st.framework && !r.fallback;
      if (!here && strict)
        fail_check(
            str(cell, " routes to ", r.framework, " (", r.bundle, "), expected ", st.framework));
      else if (!here)
        note(str(cell, ": routes to ", r.framework, " (", r.bundle, ") by fallback",
                 need.optional ? str(" (its cases are skipped: ", need.why, ")") : ""));
      else
        pass_check();
      here_count += here ? 1 : 0;
      if (here) note(str(k->name, " ", dn, ": ", r.implementation));
    }
    served += here_count;
    if (is_half_dtype(d) && here_count == 0)
      note(str("no ", dn, " op is served here (the ", dn, " cases are skipped)"));
  }
  if (served == 0)
    fail_check(str("no ", st.extension, " op of any dtype is served on ", st.framework));
}

} // namespace

dtype_need need_of(const extension_target& t, pcy_dtype dtype) {
  if (is_half_dtype(dtype))
    return {true, str(ext::dtype_name(dtype), " is served only where a bundle registers it")};
  if (dtype == PCY_DTYPE_F64 && !t.fp64)
    return {true, str(t.framework, "'s device ", t.device, " reports no fp64")};
  return {};
}

extension_suite::extension_suite(std::string name, std::string extension, std::string description,
                                 keys_of keys)
    : st_(std::make_shared<extension_target>()), optional_fallbacks_(std::make_shared<uint64_t>(0)),
      name_(std::move(name)), extension_(std::move(extension)),
      description_(std::move(description)), keys_(std::move(keys)) {}

void extension_suite::add(std::string name, pcy_dtype dtype, body f,
                          std::vector<const OpKey*> keys) {
  cells_.push_back(
      {std::move(name), [st = st_, fb = optional_fallbacks_, dtype, f = std::move(f),
                         keys = std::move(keys)] { run_cell(*st, *fb, dtype, keys, f); }});
}

suite extension_suite::finish() {
  suite s;
  s.name = name_;
  s.extension = extension_;
  s.description = description_;
  const auto st = st_;
  const auto fb = optional_fallbacks_;
  s.cases.push_back({"every op and dtype is served by the bundle here", [st, keys = keys_] {
                       if (!st->backend) skip("no backend (the suite was not set up)");
                       routes(*st, keys);
                     }});
  for (test_case& c : cells_)
    s.cases.push_back(std::move(c));
  cells_.clear();
  s.cases.push_back({"no op ran by fallback", [st, fb] {
                       if (!st->backend) skip("no backend (the suite was not set up)");
                       const uint64_t all = st->backend->fallback_count();
                       // The optional cells that fell back were skipped with their reason.
                       const uint64_t n = all - std::min(all, *fb);
                       if (*fb != 0)
                         note(str(*fb, " op call(s) of optional cells ran by fallback (skipped)"));
                       if (n != 0 && !st->required)
                         skip(str(n, " op call(s) ran on another framework by fallback; "
                                     "their cases were skipped"));
                       expect_true(n == 0, str(n, " op call(s) ran by fallback: none may"));
                     }});
  s.setup = [st, fb, ext_name = name_](const target& t) {
    std::string names, reasons;
    bool any_ops = false;
    for (const BundleInfo* b : t.bundles) {
      names += (names.empty() ? "" : ", ") + b->name();
      if (!b->ops().empty())
        any_ops = true;
      else
        reasons += str(reasons.empty() ? "" : "; ", b->name(), ": ",
                       b->reason().empty() ? "no reason given" : b->reason());
    }
    if (!any_ops) skip(str(names, " serve(s) no ops here: ", reasons));
    st->extension = ext_name;
    st->framework = t.framework.name();
    st->bundles = names;
    st->required = t.options.require_ops;
    st->backend = std::make_unique<Backend>(t.registry, t.framework.name());
    st->device = st->backend->device().name;
    st->fp64 = device_flag(st->backend->device(), PCY_PROP_FP64, true);
    st->flush_f32 = may_flush_f32(*st->backend);
    *fb = 0;
  };
  s.teardown = [st] { st->backend.reset(); };
  return s;
}

// ---- messages --------------------------------------------------------------------------------

std::string g10(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}
std::string g3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
std::string shape_tag(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}
size_t count_of(const std::vector<int64_t>& s) {
  size_t n = 1;
  for (int64_t e : s)
    n *= static_cast<size_t>(e);
  return n;
}
void expect_true(bool ok, const std::string& what) {
  if (ok)
    pass_check();
  else
    fail_check(what);
}
void report_element(bool ok, const std::string& what, const char* tn, size_t i, double got,
                    double ref, double tol) {
  if (ok)
    pass_check();
  else
    fail_check(str(tn, " ", what, ": element ", i, " got ", g10(got), " expected ", g10(ref),
                   " (tolerance ", g3(tol), ")"));
}

} // namespace parenchyma::conformance
