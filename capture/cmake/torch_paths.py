"""Prints CMake set() lines describing the torch that the capture agent builds
against. Used instead of find_package(Torch): the CUDA wheels' TorchConfig.cmake
requires a CUDA toolkit, while the agent only needs headers and libraries."""
import os
import sys
import sysconfig

try:
    import torch
except ImportError as error:  # reported by CMake as a configure error
    print(f'set(MESHSCOPE_TORCH_ERROR "torch is not importable by {sys.executable}: {error}")')
    sys.exit(0)

def loaded_libstdcxx() -> str:
    """The libstdc++.so.6 this process loaded with torch: the C++ runtime the
    extension must share (its path, resolved; empty if none is mapped)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if os.path.basename(path).startswith("libstdc++.so"):
                    return os.path.realpath(path)
    except OSError:
        pass
    return ""


root = os.path.dirname(torch.__file__)
include = os.path.join(root, "include")
values = {
    "MESHSCOPE_TORCH_VERSION": torch.__version__,
    "MESHSCOPE_TORCH_INCLUDE_DIRS": ";".join(
        [include, os.path.join(include, "torch", "csrc", "api", "include")]
    ),
    "MESHSCOPE_TORCH_LIB_DIR": os.path.join(root, "lib"),
    "MESHSCOPE_TORCH_CXX11_ABI": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
    "MESHSCOPE_TORCH_CUDA": torch.version.cuda or "",
    "MESHSCOPE_PYTHON_INCLUDE_DIR": sysconfig.get_paths()["include"],
    "MESHSCOPE_PYTHON_EXT_SUFFIX": sysconfig.get_config_var("EXT_SUFFIX"),
    "MESHSCOPE_TORCH_LIBSTDCXX": loaded_libstdcxx(),
}
for key, value in values.items():
    print(f'set({key} "{value}")')
