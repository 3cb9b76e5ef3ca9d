// Running the test cases from a test program's own main() (one that skips with 77, filters or
// sets up first). Catch2 v2's implementation is compiled once per build (catch_impl.cpp, the
// library parenchyma_test_catch), not again in each program with a main of its own: CI builds the
// tests three times, and v2's implementation costs about as much CPU as a whole test source.
#pragma once

namespace parenchyma_test {
// Catch's session over this command line (argv[0] the program); the exit code it gives.
int run_catch(int argc, char** argv);
} // namespace parenchyma_test
