"""Prints CMake set() lines about the CUDA side of the Python's torch: its
CUDA version (empty for a CPU build) and the include folders of the NVIDIA
wheels it depends on (nccl.h, cuda_runtime.h), for machines without a CUDA
toolkit. Prints only an empty version when torch is not importable."""
import glob
import os

try:
    import torch
except ImportError:
    print('set(MESHSCOPE_TORCH_CUDA "")')
    raise SystemExit(0)

site = os.path.dirname(os.path.dirname(torch.__file__))
includes = sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))
print(f'set(MESHSCOPE_TORCH_CUDA "{torch.version.cuda or ""}")')
print(f'set(MESHSCOPE_WHEEL_INCLUDE_DIRS "{";".join(includes)}")')
