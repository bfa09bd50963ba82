"""An RL trainer prepares per-sample advantages in its training loop with
torch.tensor(list) and multiplies them into the policy's DTensor log
probabilities: `aten.mul.Tensor: got mixed torch.Tensor and DTensor`.

Modelled on huggingface/trl#4550, "FSDP2+PEFT(LoRA)+GRPO result in `mixed
torch.Tensor and DTensor`" (the error raised while the GRPO trainer prepares
its inputs): https://github.com/huggingface/trl/issues/4550"""

# what meshscope must report (tests/capture/test_birth_corpus.py)
EXPECT = {"ops": ["aten::mul.Tensor"], "origin": "H", "name": "advantages"}


import torch
from torch.distributed.tensor import Replicate, distribute_tensor

from corpus_common import finish, result, setup


def main():
    _, mesh = setup("dp")
    logp = distribute_tensor(torch.randn(4), mesh, [Replicate()])
    rewards = [1.0, 0.0, 0.5, 0.25]
    advantages = torch.tensor(rewards)  # BIRTH
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-6)
    loss = -(logp * advantages).mean()  # INCIDENT
    result(loss)
    finish()


if __name__ == "__main__":
    main()
