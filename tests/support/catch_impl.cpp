// Catch2's implementation, compiled once (parenchyma_test_catch): v2's single header emits it in
// the one source that defines CATCH_CONFIG_RUNNER; v3 is a library already. Also run_catch
// (catch_run.hpp), which test programs with a main of their own call.
#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif
#include "support/catch_run.hpp"

int parenchyma_test::run_catch(int argc, char** argv) { return Catch::Session().run(argc, argv); }
