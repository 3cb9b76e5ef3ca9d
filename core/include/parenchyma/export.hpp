// parenchyma: symbol visibility for the core library (everything else stays hidden). On Windows
// the core exports its API from parenchyma-core.dll (PARENCHYMA_BUILDING_CORE, set by its build)
// and a program imports it; a program that links a static core defines PARENCHYMA_STATIC.
#pragma once

#if defined(_WIN32) && !defined(PARENCHYMA_STATIC)
#if defined(PARENCHYMA_BUILDING_CORE)
#define PARENCHYMA_API __declspec(dllexport)
#else
#define PARENCHYMA_API __declspec(dllimport)
#endif
#elif defined(_WIN32)
#define PARENCHYMA_API
#else
#define PARENCHYMA_API __attribute__((visibility("default")))
#endif
