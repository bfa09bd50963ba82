# meshscope_find_cuda_headers against fake folders (cmake -P): the NVIDIA
# wheels' nvidia/cu13/include holds cuda_runtime.h without the crt/ it
# includes; it must never be chosen over a toolkit that has crt/, and never
# at all when incomplete. Run by ctest as cmake.cuda_headers.
include(${ROOT}/cmake/meshscope_cuda_headers.cmake)
set(base "${WORK}/cuda_headers_test")
file(REMOVE_RECURSE "${base}")
set(wheel "${base}/site-packages/nvidia/cu13/include")
set(nccl_wheel "${base}/site-packages/nvidia/nccl/include")
set(toolkit "${base}/cuda-13.0")
file(WRITE "${wheel}/cuda_runtime.h" "#include \"crt/host_config.h\"\n")
file(WRITE "${nccl_wheel}/nccl.h" "#include <cuda_runtime.h>\n")
file(WRITE "${toolkit}/include/cuda_runtime.h" "#include \"crt/host_config.h\"\n")
file(WRITE "${toolkit}/include/crt/host_config.h" "\n")
file(WRITE "${toolkit}/bin/nvcc" "#!/bin/sh\n")
file(CHMOD "${toolkit}/bin/nvcc" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

function(expect what actual wanted)
  if(NOT "${actual}" STREQUAL "${wanted}")
    message(FATAL_ERROR "${what}: got '${actual}', want '${wanted}'")
  endif()
  message(STATUS "ok: ${what} = ${actual}")
endfunction()

# 1. The GPU machine's case: wheel folders as hints, nvcc on PATH.
set(ENV{PATH} "${toolkit}/bin:/usr/bin:/bin")
unset(ENV{CUDA_HOME})
unset(ENV{CUDA_PATH})
unset(ENV{NCCL_HOME})
meshscope_find_cuda_headers(nccl cuda HINTS "${wheel}" "${nccl_wheel}")
expect("nccl.h from the wheel" "${nccl}" "${nccl_wheel}")
expect("cuda_runtime.h from the toolkit, not the wheel without crt/" "${cuda}"
       "${toolkit}/include")

# 2. The same through CUDA_HOME, no nvcc on PATH.
set(ENV{PATH} "/nonexistent")
set(ENV{CUDA_HOME} "${toolkit}")
meshscope_find_cuda_headers(nccl cuda HINTS "${wheel}" "${nccl_wheel}")
expect("cuda_runtime.h through CUDA_HOME" "${cuda}" "${toolkit}/include")

# 3. No toolkit: the incomplete wheel folder is never taken (a machine-wide
#    /usr/local/cuda may still be found; anything but the wheel is right).
unset(ENV{CUDA_HOME})
meshscope_find_cuda_headers(nccl cuda HINTS "${wheel}" "${nccl_wheel}")
if(cuda STREQUAL "${wheel}")
  message(FATAL_ERROR "the wheel's folder without crt/ was chosen for cuda_runtime.h")
endif()
message(STATUS "ok: without a toolkit, cuda_runtime.h = ${cuda} (not the wheel's)")

# 4. A complete folder among the hints is taken when no toolkit is found first.
file(WRITE "${wheel}/crt/host_config.h" "\n")
meshscope_find_cuda_headers(nccl cuda HINTS "${wheel}" "${nccl_wheel}")
if(NOT EXISTS /usr/local/cuda/include/crt/host_config.h)
  expect("a complete wheel folder" "${cuda}" "${wheel}")
endif()
file(REMOVE_RECURSE "${base}")
