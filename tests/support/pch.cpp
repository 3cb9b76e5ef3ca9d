// Carrier of the test programs' precompiled header (tests/CMakeLists.txt, parenchyma_test_pch):
// the header is built with this program's flags, which are every test program's.
int pcy_test_pch_carrier() { return 0; }
