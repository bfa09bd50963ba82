"""A torch.compile'd attention helper builds its additive mask with
torch.full inside the compiled function and adds it to the DTensor scores;
Dynamo traces the function and DTensor's dispatch rejects the plain mask
while tracing: `aten.add.Tensor: got mixed torch.Tensor and DTensor`. The
birth must name the line inside the compiled function, not its caller.

Modelled on pytorch/pytorch#122447, "[PT2][DTensor] crash during compiling
1D TP or SP on MLP models" (tensor-parallel DTensor code under
torch.compile failing while Dynamo traces it):
https://github.com/pytorch/pytorch/issues/122447"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::add.Tensor"], "origin": "H", "name": "mask",
          # inside torch.compile'd code meshscope names no mesh in the user's scope
          "unplaced": "no name for the DTensor's mesh"}

import torch
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


@torch.compile(backend="eager")
def masked_scores(scores):
    mask = torch.full(scores.shape[-2:], float("-inf")).triu(1)  # BIRTH
    return scores + mask  # INCIDENT


def main():
    _, mesh = setup()
    scores = distribute_tensor(torch.randn(2, 4, 4), mesh, [Replicate()])
    try:
        result(masked_scores(scores))
    except Exception:  # noqa: BLE001 - the error is what the report is about
        pass
    finish()


if __name__ == "__main__":
    main()
