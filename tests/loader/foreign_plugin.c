/* A framework plugin built by a compiler for another CPU (tests/loader/CMakeLists.txt picks one:
 * the host's in a cross build, a cross compiler in a native one): the loader must refuse it from
 * its ELF header, at the file stage, and never dlopen it. Its entry would fail the entry stage
 * anyway (no table), so a loader that did load it would say so in another stage. */
#include <parenchyma/abi/pcy_framework.h>

#include <stddef.h>

__attribute__((visibility("default"))) const pcy_framework_api* pcy_framework_entry(void) {
  return NULL;
}
