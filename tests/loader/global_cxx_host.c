/* A host that links no C++ (as the Python interpreter): it loads the core through a shim with
 * dlopen(RTLD_LOCAL), so libstdc++ starts outside the global symbol scope. Once the registry has
 * loaded plugins, libstdc++ must be global (C++ libraries that plugins load, such as LLVM under
 * PoCL, bind libstdc++'s call_once state there: Python crashed without it, docs/python.md) —
 * unless PARENCHYMA_GLOBAL_CXX_RUNTIME=0 (argv[3] == "off"), which must leave the scope alone.
 *   global_cxx_host SHIM PLUGIN_DIR [off]            exit 0 pass, 1 fail, 77 skipped */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int off = argc > 3 && strcmp(argv[3], "off") == 0;
  if (off) setenv("PARENCHYMA_GLOBAL_CXX_RUNTIME", "0", 1);
  const char* sym = "_ZSt9terminatev"; /* std::terminate(), defined by libstdc++ */
  if (dlsym(RTLD_DEFAULT, sym) != NULL) {
    printf("SKIPPED: libstdc++ is global before the core loads (a sanitizer runtime?)\n");
    return 77;
  }
  void* shim = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (shim == NULL) {
    printf("FAIL: dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  if (dlsym(RTLD_DEFAULT, sym) != NULL) {
    printf("FAIL: libstdc++ global right after a local dlopen: the test proves nothing\n");
    return 1;
  }
  int (*load)(const char*) = (int (*)(const char*))dlsym(shim, "pcy_shim_load");
  if (load == NULL) return 1;
  const int frameworks = load(argv[2]);
  if (frameworks < 1) {
    printf("FAIL: the registry loaded %d frameworks from %s\n", frameworks, argv[2]);
    return 1;
  }
  const int global = dlsym(RTLD_DEFAULT, sym) != NULL;
  printf("%d framework(s) loaded; libstdc++ %s the global scope (fix %s)\n", frameworks,
         global ? "is in" : "is not in", off ? "off" : "on");
  return global == !off ? 0 : 1;
}
