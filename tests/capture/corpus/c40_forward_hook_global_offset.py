"""A forward hook adds an offset the script keeps as a module-level tensor
to a tensor-parallel layer's DTensor output (activation steering, a
debugging probe): `aten.add.Tensor: got mixed torch.Tensor and DTensor`.
The hook function reads the offset from its module's globals, so no local
of any frame holds it: meshscope names it from the globals, and its fix
rebinds the global (`global steering`), since a plain assignment in the
hook would make the name local.

Modelled on pytorch/pytorch#175613, "[DTensor] DTensor support for
compile_safe_hooks" (forward hooks of a parallelized model receive the
layers' DTensor outputs, following pytorch/torchtitan#2328):
https://github.com/pytorch/pytorch/pull/175613"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add.Tensor"], "origin": "H", "name": "steering"}


import torch
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

from corpus_common import finish, result, setup

steering = None


def add_steering(module, inputs, output):
    return output + steering  # INCIDENT


def main():
    global steering
    _, mesh = setup()
    model = parallelize_module(nn.Linear(8, 8, bias=False), mesh,
                               ColwiseParallel(use_local_output=False))
    steering = torch.linspace(-1.0, 1.0, 8)  # BIRTH
    model.register_forward_hook(add_steering)
    result(model(torch.randn(4, 8)))
    finish()


if __name__ == "__main__":
    main()
