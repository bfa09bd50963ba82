# The GPU world (MESHSCOPE_BUILD_CUDA): needs nccl.h and the CUDA runtime
# headers it includes, from a CUDA toolkit or from the NVIDIA wheels of
# MESHSCOPE_PYTHON's torch; compiles with the host compiler, links no CUDA.
# Default: ON when that torch is a CUDA build and nccl.h is found.
if(DEFINED MESHSCOPE_BUILD_CUDA AND NOT MESHSCOPE_BUILD_CUDA)
  return()  # turned off: no detection
endif()
set(MESHSCOPE_TORCH_CUDA "")
set(MESHSCOPE_WHEEL_INCLUDE_DIRS "")
if(EXISTS "${MESHSCOPE_PYTHON}")
  execute_process(
    COMMAND "${MESHSCOPE_PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/cuda_paths.py"
    OUTPUT_VARIABLE cuda_paths RESULT_VARIABLE cuda_paths_rc ERROR_QUIET)
  if(cuda_paths_rc EQUAL 0)
    file(WRITE "${PROJECT_BINARY_DIR}/cuda_paths.cmake" "${cuda_paths}")
    include("${PROJECT_BINARY_DIR}/cuda_paths.cmake")
  endif()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/meshscope_cuda_headers.cmake)
# A cached folder of cuda_runtime.h without crt/ (an earlier configure took
# the wheel's nvidia/cu13/include) is searched again, as is a missing one.
if(MESHSCOPE_CUDA_INCLUDE_DIR AND NOT EXISTS "${MESHSCOPE_CUDA_INCLUDE_DIR}/crt/host_config.h")
  message(WARNING "MESHSCOPE_CUDA_INCLUDE_DIR=${MESHSCOPE_CUDA_INCLUDE_DIR} has cuda_runtime.h but "
                  "no crt/host_config.h, which it includes: looking for a complete CUDA include "
                  "folder instead")
  unset(MESHSCOPE_CUDA_INCLUDE_DIR CACHE)
endif()
if(NOT MESHSCOPE_NCCL_INCLUDE_DIR OR NOT MESHSCOPE_CUDA_INCLUDE_DIR)
  meshscope_find_cuda_headers(nccl_dir cuda_dir HINTS ${MESHSCOPE_WHEEL_INCLUDE_DIRS})
  if(NOT MESHSCOPE_NCCL_INCLUDE_DIR)  # cached, so a user's -D... wins
    set(MESHSCOPE_NCCL_INCLUDE_DIR "${nccl_dir}" CACHE PATH
        "Folder of nccl.h (NCCL 2.27 or later) for the NCCL profiler plugin" FORCE)
  endif()
  if(NOT MESHSCOPE_CUDA_INCLUDE_DIR)
    set(MESHSCOPE_CUDA_INCLUDE_DIR "${cuda_dir}" CACHE PATH
        "Folder of cuda_runtime.h and its crt/ (nccl.h includes it)" FORCE)
  endif()
endif()

set(cuda_found OFF)
if(MESHSCOPE_NCCL_INCLUDE_DIR AND MESHSCOPE_CUDA_INCLUDE_DIR)
  set(cuda_found ON)
endif()
set(cuda_default OFF)
if(cuda_found AND NOT MESHSCOPE_TORCH_CUDA STREQUAL "")
  set(cuda_default ON)
endif()
option(MESHSCOPE_BUILD_CUDA "Build GPU code (NCCL profiler plugin); default: ON when the \
project Python's torch is a CUDA build and nccl.h is found" ${cuda_default})
if(MESHSCOPE_BUILD_CUDA)
  if(NOT cuda_found)
    message(FATAL_ERROR "MESHSCOPE_BUILD_CUDA=ON needs nccl.h and cuda_runtime.h (a CUDA toolkit "
                        "with NCCL, or the nvidia-nccl wheel beside torch); nccl.h: "
                        "${MESHSCOPE_NCCL_INCLUDE_DIR}, cuda_runtime.h: "
                        "${MESHSCOPE_CUDA_INCLUDE_DIR}. Pass -DMESHSCOPE_NCCL_INCLUDE_DIR=... "
                        "-DMESHSCOPE_CUDA_INCLUDE_DIR=..., or configure with "
                        "-DMESHSCOPE_BUILD_CUDA=OFF")
  endif()
  set(MESHSCOPE_NCCL_INCLUDE_DIRS ${MESHSCOPE_NCCL_INCLUDE_DIR} ${MESHSCOPE_CUDA_INCLUDE_DIR})
  message(STATUS "cuda: nccl.h in ${MESHSCOPE_NCCL_INCLUDE_DIR} (torch CUDA "
                 "'${MESHSCOPE_TORCH_CUDA}')")
endif()
