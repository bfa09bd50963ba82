# meshscope_find_cuda_headers(NCCL_VAR CUDA_VAR HINTS dir...): the folders
# of nccl.h and of a complete set of CUDA runtime headers, for the NCCL
# profiler plugin. A folder counts for cuda_runtime.h only if it also holds
# crt/host_config.h, which cuda_runtime.h includes: the NVIDIA wheels beside
# a CUDA 13 torch ship cuda_runtime.h without crt/ (nvidia/cu13/include),
# and taking that folder failed the build on a GPU machine whose toolkit had
# them. The toolkit (nvcc on PATH, CUDA_HOME, CUDA_PATH, /usr/local/cuda)
# is searched before the hints for the runtime headers; nccl.h is searched
# in the hints first (the wheel's matches the NCCL torch loads). Sets the
# variables to the folders, or to <VAR>-NOTFOUND. Usable in script mode
# (cmake -P), which tests/cmake does.
function(meshscope_find_cuda_headers nccl_var cuda_var)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "HINTS")
  set(toolkit "")
  find_program(meshscope_nvcc nvcc NO_CACHE)
  if(meshscope_nvcc)
    get_filename_component(bin "${meshscope_nvcc}" REALPATH)
    get_filename_component(bin "${bin}" DIRECTORY)
    list(APPEND toolkit "${bin}/../include" "${bin}/../targets/x86_64-linux/include"
         "${bin}/../targets/sbsa-linux/include")
  endif()
  foreach(env CUDA_HOME CUDA_PATH)
    if(DEFINED ENV{${env}} AND NOT "$ENV{${env}}" STREQUAL "")
      list(APPEND toolkit "$ENV{${env}}/include")
    endif()
  endforeach()
  list(APPEND toolkit /usr/local/cuda/include)

  set(nccl "${nccl_var}-NOTFOUND")
  set(nccl_home "")
  if(DEFINED ENV{NCCL_HOME} AND NOT "$ENV{NCCL_HOME}" STREQUAL "")
    set(nccl_home "$ENV{NCCL_HOME}/include")
  endif()
  foreach(dir IN LISTS arg_HINTS nccl_home toolkit)
    if(EXISTS "${dir}/nccl.h")
      get_filename_component(nccl "${dir}" ABSOLUTE)
      break()
    endif()
  endforeach()

  set(cuda "${cuda_var}-NOTFOUND")
  foreach(dir IN LISTS toolkit arg_HINTS)
    if(EXISTS "${dir}/cuda_runtime.h" AND EXISTS "${dir}/crt/host_config.h")
      get_filename_component(cuda "${dir}" ABSOLUTE)
      break()
    endif()
  endforeach()
  set(${nccl_var} "${nccl}" PARENT_SCOPE)
  set(${cuda_var} "${cuda}" PARENT_SCOPE)
endfunction()
