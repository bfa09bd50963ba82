"""A knowledge-distillation loss turns the student and teacher logits into local
tensors with `to_local()` but builds its valid-token mask from the labels, which
are still DTensors; the masked KL meets the mask: `aten.mul.Tensor: got mixed
torch.Tensor and DTensor`.

Modelled on NVIDIA-NeMo/Automodel#2815, "fix(loss): localize DTensor labels
before KD masking" (`KDLoss.forward()` built `valid_mask` from DTensor labels
while the logits were converted to local tensors):
https://github.com/NVIDIA-NeMo/Automodel/pull/2815"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul.Tensor"], "origin": "C", "name": "kl"}


import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Replicate, distribute_tensor

from corpus_common import finish, result, setup


def kd_loss(student_logits, teacher_logits, labels):
    valid_mask = labels != -100
    if isinstance(student_logits, DTensor):
        student, teacher = student_logits.to_local(), teacher_logits.to_local()  # BIRTH
    kl = F.kl_div(student.log_softmax(-1), teacher.log_softmax(-1), reduction="none",
                  log_target=True).sum(-1)
    return (kl * valid_mask).sum() / valid_mask.sum()  # INCIDENT


def main():
    _, mesh = setup()
    student_logits = distribute_tensor(torch.randn(2, 4, 10), mesh, [Replicate()])
    teacher_logits = distribute_tensor(torch.randn(2, 4, 10), mesh, [Replicate()])
    labels = torch.tensor([[1, 2, -100, -100], [3, 4, 5, -100]])
    result(kd_loss(student_logits, teacher_logits, distribute_tensor(labels, mesh, [Replicate()])))
    finish()


if __name__ == "__main__":
    main()
