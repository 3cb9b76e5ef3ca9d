// parenchyma Python bindings: parenchyma.info() and parenchyma.devices(), what
// parenchyma-info --json shows (the same keys, tools/info/parenchyma_info.cpp), as dicts built
// from the public Registry API of the process's global registry.
#include "bindings.hpp"

#include <parenchyma/sdk/schema_names.hpp>

#include <variant>

namespace parenchyma::python {

namespace {

py::object property(const property_value& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

py::list plugins(const Registry& r) {
  py::list out;
  for (const LoadReportEntry& e : r.load_report()) {
    py::dict d;
    d["name"] = e.name;
    d["kind"] = e.kind;
    d["path"] = e.path;
    d["status"] = e.status;
    d["stage"] = e.stage;
    d["reason"] = e.reason;
    d["advice"] = e.advice;
    out.append(d);
  }
  return out;
}

py::list frameworks(const Registry& r) {
  py::list out;
  for (const auto& f : r.frameworks()) {
    py::list devices;
    for (const Device& dev : f->devices()) {
      py::dict props;
      for (const auto& [k, v] : dev.properties)
        props[py::str(k)] = property(v);
      py::dict d;
      d["index"] = dev.index;
      d["name"] = dev.name;
      d["vendor"] = dev.vendor;
      d["kind"] = to_string(dev.kind);
      d["properties"] = props;
      devices.append(d);
    }
    py::dict fd;
    fd["name"] = f->name();
    fd["path"] = f->path();
    fd["version"] = f->version();
    fd["reason"] = f->reason();
    fd["devices"] = devices;
    out.append(fd);
  }
  return out;
}

py::list devices(const Registry& r) {
  py::list out;
  for (const RankedDevice& d : r.device_ranking()) {
    py::dict one;
    one["backend"] = d.framework->name() + ":" + std::to_string(d.device);
    one["kind"] = to_string(d.framework->devices()[d.device].kind);
    one["reason"] = d.reason;
    out.append(one);
  }
  return out;
}

// An op's arguments from its schema; None for a bundle without one (ABI 1.0).
py::object arguments(const pcy_op_schema* s) {
  if (s == nullptr) return py::none();
  py::list out;
  for (uint32_t i = 0; i < s->arg_count; ++i) {
    const pcy_arg_schema& x = s->args[i];
    py::dict one;
    one["name"] = sdk::schema_text(x.name);
    one["kind"] = sdk::schema_kind_name(x.kind);
    if (x.kind == PCY_SCHEMA_TENSOR || x.kind == PCY_SCHEMA_SCALAR) {
      one["intent"] = sdk::schema_intent_name(x.kind, x.intent);
      if (x.kind == PCY_SCHEMA_SCALAR || x.dtype == PCY_SCHEMA_DTYPE_OP)
        one["dtype"] = "op";
      else if (x.dtype == PCY_SCHEMA_DTYPE_ANY)
        one["dtype"] = "any";
      else
        one["dtype"] = dtype_name(static_cast<pcy_dtype>(x.dtype));
    }
    if (x.kind == PCY_SCHEMA_TENSOR)
      one["rank"] =
          x.rank == PCY_SCHEMA_RANK_ANY ? std::string("any") : std::to_string(int(x.rank));
    out.append(one);
  }
  return out;
}

py::dict info() {
  const Registry& r = Registry::global();
  py::dict out;
  out["version"] = 1;
  out["plugins"] = plugins(r);
  out["frameworks"] = frameworks(r);
  py::list ranking;
  for (const Framework* f : r.ranking())
    ranking.append(f->name());
  out["ranking"] = ranking;
  out["devices"] = devices(r);
  py::list notices;
  for (const std::string& n : r.notices())
    notices.append(n);
  out["notices"] = notices;
  py::dict selected;
  try {
    const Selection s = r.select();
    selected["backend"] = s.framework + ":" + std::to_string(s.device);
    selected["framework"] = s.framework;
    selected["device"] = s.device;
    selected["reason"] = s.reason;
  } catch (const parenchyma::error& e) {
    selected["backend"] = py::none();
    selected["error"] = std::string(e.what());
  }
  out["selected"] = selected;
  py::list ops;
  for (const OpCoverage& c : r.op_coverage()) {
    py::dict one;
    one["extension"] = c.extension;
    one["op"] = c.op;
    one["dtype"] = dtype_name(c.dtype);
    one["framework"] = c.framework;
    one["bundle"] = c.bundle;
    one["implementation"] = c.implementation;
    one["arguments"] = arguments(c.schema);
    ops.append(one);
  }
  out["ops"] = ops;
  py::dict config;
  config["sources"] = py::cast(r.config().sources);
  config["fallback"] = to_string(r.config().fallback);
  config["ranking"] = r.config().ranking_by_kind.empty() ? py::cast(r.config().ranking)
                                                         : py::cast(r.config().ranking_by_kind);
  out["config"] = config;
  return out;
}

} // namespace

void bind_info(py::module_& m) {
  m.def("info", &info, R"(What the process's registry found, as a dict with the keys (and
values) of `parenchyma-info --json` (dtypes spelled as NumPy does, 'float32' for the tool's
'f32'):
  version: 1, the layout's version;
  plugins: one dict per plugin file tried (name, kind, path, status, stage, reason, advice);
  frameworks: name, path, version, reason, devices (index, name, vendor, kind, properties);
  ranking: framework names, best first;
  devices: every device, best first: backend ('opencl:0'), kind, reason (as devices());
  notices: configuration problems that did not stop the registry;
  selected: the default backend: backend ('opencl:0'), framework, device (index), reason; or,
    when nothing can be selected, backend None and error;
  ops: extension, op, dtype, framework, bundle, implementation, arguments (the op's schema:
    name, kind, intent, dtype, rank per argument; None without a schema) per op a bundle serves;
  config: sources (the config files read), fallback, ranking.)");
  m.def(
      "devices", [] { return devices(Registry::global()); },
      R"(Every device the registry found, best first, as a list of dicts with the keys of
`parenchyma-info --json`'s "devices": backend (the request string for Backend(), e.g.
'opencl:0'), kind ('cpu', 'gpu', 'accelerator', 'other') and reason (why it ranks there).)");
}

} // namespace parenchyma::python
