"""Offline distillation reads the teacher's precomputed log-probabilities from the
DataLoader; each batch stays a plain tensor while the student's log-probs are
DTensors sharded over the batch, and the KL loss meets them:
`aten.kl_div.default: got mixed torch.Tensor and DTensor`.

Modelled on pytorch/torchtitan#2348, "[SimpleFSDP] Enable DTensor inputs for data
parallel training" (DataLoader batches must be wrapped as DTensors with Shard(0)
when the model computes in DTensors, else they meet DTensors as plain tensors):
https://github.com/pytorch/torchtitan/pull/2348"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::kl_div"], "origin": "D", "name": "teacher_logprobs"}


import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.utils.data import DataLoader, Dataset, Subset

from corpus_common import finish, result, setup


class TeacherLogprobs(Dataset):
    """Sample i of the global batch of 4, the same on every rank."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.randn(10, generator=torch.Generator().manual_seed(i)).log_softmax(-1)


def main():
    rank, mesh = setup("dp")
    head = distribute_tensor(torch.randn(8, 10), mesh, [Replicate()])
    per_rank = 4 // mesh.size()  # each rank reads its contiguous part of the batch
    own = Subset(TeacherLogprobs(), range(rank * per_rank, (rank + 1) * per_rank))
    hidden_all = torch.randn(4, 8)
    for teacher_logprobs in DataLoader(own, batch_size=per_rank):  # BIRTH
        hidden = DTensor.from_local(hidden_all.chunk(mesh.size())[rank], mesh, [Shard(0)])
        student_logprobs = F.log_softmax(hidden @ head, dim=-1)
        result(F.kl_div(student_logprobs, teacher_logprobs, log_target=True, reduction="sum"))  # INCIDENT
        break
    finish()


if __name__ == "__main__":
    main()
