// The test main for Catch2 v2 (v3 links Catch2WithMain instead); Catch's implementation is in
// catch_impl.cpp.
#if !__has_include(<catch2/catch_test_macros.hpp>)
#include "support/catch_run.hpp"

int main(int argc, char** argv) { return parenchyma_test::run_catch(argc, argv); }
#endif
