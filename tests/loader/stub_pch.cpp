// Carrier of the stub variants' precompiled header (tests/loader/CMakeLists.txt): built with the
// variants' flags, loaded by no test (its directory is not a plugin directory of any test).
int pcy_stub_pch_carrier() { return 0; }
