/* A plugin built for another architecture (32-bit x86 Windows) than the core: the loader must
   refuse it at the load stage with the system's reason, never call it. */
#include <stddef.h>

__declspec(dllexport) const void* pcy_framework_entry(void) { return NULL; }
