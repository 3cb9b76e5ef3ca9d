// parenchyma: the whole C++ API in one include.
#pragma once

#include <parenchyma/backend.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/graph.hpp>
#include <parenchyma/registry.hpp>
#include <parenchyma/shared_tensor.hpp>
