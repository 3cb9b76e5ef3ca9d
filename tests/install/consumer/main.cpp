// The install test's application: the default Backend (or the one named on the command line),
// a SharedTensor written on the host, moved, filled on the device and read back.
//   consumer [request]    prints "ranking: ...", "backend: ...", "tensor: ok"
#include <parenchyma/parenchyma.hpp>

#include <cstdio>
#include <string>
#include <utility>

int main(int argc, char** argv) {
  try {
    std::string ranking;
    for (const parenchyma::Framework* f : parenchyma::Registry::global().ranking())
      ranking += " " + f->name();
    std::printf("ranking:%s\n", ranking.c_str());

    const parenchyma::Backend backend =
        argc > 1 ? parenchyma::Backend(std::string_view(argv[1])) : parenchyma::Backend();
    std::printf("backend: %s (%s)\n", backend.name().c_str(), backend.selection().reason.c_str());

    parenchyma::SharedTensor<float> tensor({3, 5});
    auto host = tensor.write_only();
    for (size_t i = 0; i < host.size(); ++i)
      host[i] = static_cast<float>(i) * 0.5f;
    parenchyma::SharedTensor<float> moved(std::move(tensor));
    for (size_t i = 0; i < moved.read().size(); ++i)
      if (moved.read()[i] != static_cast<float>(i) * 0.5f) {
        std::printf("tensor: data lost in the move at %zu\n", i);
        return 1;
      }

    // Overwrite it on the device through the framework's own fill, then read it on the host.
    const float pattern = 2.5f;
    pcy_memory_fill_args fill{};
    fill.struct_size = sizeof fill;
    fill.queue = backend.queue();
    fill.memory = moved.write(backend);
    fill.bytes = moved.size() * sizeof(float);
    fill.pattern = &pattern;
    fill.pattern_size = sizeof pattern;
    parenchyma::throw_if(backend.framework().api().memory_fill(&fill), "fill");
    backend.synchronize();
    for (float v : moved.read())
      if (v != pattern) {
        std::printf("tensor: device fill not seen on the host (%g)\n", static_cast<double>(v));
        return 1;
      }
    std::printf("tensor: ok\n");
    return 0;
  } catch (const parenchyma::error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
