// parenchyma Python bindings: parenchyma.info(), what parenchyma-info --json shows, as a dict
// built from the public Registry API of the process's global registry.
#include "bindings.hpp"

#include <variant>

namespace parenchyma::python {

namespace {

py::object property(const property_value& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

py::list load_report(const Registry& r) {
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

py::dict info() {
  const Registry& r = Registry::global();
  py::dict out;
  out["load_report"] = load_report(r);
  out["frameworks"] = frameworks(r);
  py::list ranking;
  for (const Framework* f : r.ranking())
    ranking.append(f->name());
  out["ranking"] = ranking;
  py::list devices;
  for (const RankedDevice& d : r.device_ranking()) {
    py::dict one;
    one["backend"] = d.framework->name() + ":" + std::to_string(d.device);
    one["kind"] = to_string(d.framework->devices()[d.device].kind);
    one["reason"] = d.reason;
    devices.append(one);
  }
  out["devices"] = devices;
  try {
    const Selection s = r.select();
    out["selection"] = s.framework + ":" + std::to_string(s.device);
    out["selection_reason"] = s.reason;
  } catch (const parenchyma::error& e) {
    out["selection"] = py::none();
    out["selection_reason"] = std::string(e.what());
  }
  py::list ops;
  for (const OpCoverage& c : r.op_coverage()) {
    py::dict one;
    one["extension"] = c.extension;
    one["op"] = c.op;
    one["dtype"] = dtype_name(c.dtype);
    one["framework"] = c.framework;
    one["bundle"] = c.bundle;
    one["implementation"] = c.implementation;
    ops.append(one);
  }
  out["ops"] = ops;
  py::list notices;
  for (const std::string& n : r.notices())
    notices.append(n);
  out["notices"] = notices;
  py::list search;
  for (const auto& p : r.search_path())
    search.append(p.string());
  out["search_path"] = search;
  return out;
}

} // namespace

void bind_info(py::module_& m) {
  m.def("info", &info, R"(What the process's registry found, as a dict (the data parenchyma-info
--json prints):
  load_report: one dict per plugin file tried (name, kind, path, status, stage, reason, advice);
  frameworks: name, path, version, reason, devices (index, name, vendor, kind, properties);
  ranking: framework names, best first; devices: every device, best first, with the reason;
  selection: the default backend's name ('opencl:0'), or None when nothing can be selected,
    and selection_reason (why, or the error);
  ops: extension, op, dtype, framework, bundle, implementation per op a bundle serves;
  notices: configuration problems that did not stop the registry; search_path.)");
}

} // namespace parenchyma::python
