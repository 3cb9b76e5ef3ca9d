// Catch2 v2 and v3 behind one include: tests write against this header only.
#pragma once

#if __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#define PARENCHYMA_CATCH3 1
#else
#include <catch2/catch.hpp>
#define PARENCHYMA_CATCH3 0
#endif

using Catch::Approx;
