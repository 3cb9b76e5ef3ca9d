// The OpenCL entry points the plugin uses, resolved once from the ICD loader (libOpenCL.so.1)
// with dlopen/dlsym. Nothing links libOpenCL: a machine without it still loads the plugin,
// which then reports 0 devices and why.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>

namespace parenchyma::opencl {

// X-macro list: one line per entry point, so the struct and the resolver cannot drift apart.
#define PCY_OPENCL_FUNCTIONS(X)                                                                    \
  X(clGetPlatformIDs)                                                                              \
  X(clGetPlatformInfo)                                                                             \
  X(clGetDeviceIDs)                                                                                \
  X(clGetDeviceInfo)                                                                               \
  X(clCreateContext)                                                                               \
  X(clReleaseContext)                                                                              \
  X(clCreateCommandQueue)                                                                          \
  X(clReleaseCommandQueue)                                                                         \
  X(clRetainCommandQueue)                                                                          \
  X(clFlush)                                                                                       \
  X(clFinish)                                                                                      \
  X(clCreateBuffer)                                                                                \
  X(clRetainMemObject)                                                                             \
  X(clReleaseMemObject)                                                                            \
  X(clGetMemObjectInfo)                                                                            \
  X(clEnqueueReadBuffer)                                                                           \
  X(clEnqueueWriteBuffer)                                                                          \
  X(clEnqueueCopyBuffer)                                                                           \
  X(clEnqueueFillBuffer)                                                                           \
  X(clEnqueueMapBuffer)                                                                            \
  X(clEnqueueUnmapMemObject)                                                                       \
  X(clEnqueueMarkerWithWaitList)                                                                   \
  X(clEnqueueBarrierWithWaitList)                                                                  \
  X(clWaitForEvents)                                                                               \
  X(clReleaseEvent)                                                                                \
  X(clCreateProgramWithSource)                                                                     \
  X(clCreateProgramWithBinary)                                                                     \
  X(clBuildProgram)                                                                                \
  X(clGetProgramInfo)                                                                              \
  X(clGetProgramBuildInfo)                                                                         \
  X(clRetainProgram)                                                                               \
  X(clReleaseProgram)                                                                              \
  X(clCreateKernel)                                                                                \
  X(clReleaseKernel)                                                                               \
  X(clSetKernelArg)                                                                                \
  X(clGetKernelInfo)                                                                               \
  X(clGetKernelArgInfo)                                                                            \
  X(clGetKernelWorkGroupInfo)                                                                      \
  X(clEnqueueNDRangeKernel)

struct cl_api {
#define PCY_OPENCL_MEMBER(fn) decltype(&::fn) fn = nullptr;
  PCY_OPENCL_FUNCTIONS(PCY_OPENCL_MEMBER)
#undef PCY_OPENCL_MEMBER

  // Loads `library` (a file name or path) and resolves every entry point. On failure returns
  // false and sets `why` to a sentence that says what is missing and what to install.
  bool load(const char* library, std::string& why);
  bool loaded() const noexcept { return clEnqueueNDRangeKernel != nullptr; }
};

// "CL_OUT_OF_RESOURCES" for -5; "CL_UNKNOWN_ERROR" for a code no header names.
const char* cl_error_name(cl_int code) noexcept;

} // namespace parenchyma::opencl
