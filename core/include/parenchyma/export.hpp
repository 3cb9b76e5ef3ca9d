// parenchyma: symbol visibility for the core library (everything else stays hidden).
#pragma once

#if defined(_WIN32)
#define PARENCHYMA_API __declspec(dllexport)
#else
#define PARENCHYMA_API __attribute__((visibility("default")))
#endif
