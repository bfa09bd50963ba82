"""Hugging Face transformers tensor parallelism as its docs give it: a
(tiny) Llama loaded with `from_pretrained(..., distributed_config=
DistributedConfig(tp_plan="auto"))` on 2 ranks, its q/k/v, MLP, embedding
and head projections DTensors by the model's own tp_plan, trained a few
AdamW steps on a fixed batch. The model is built from a config with a
fixed seed and saved once to $SCENARIO_OUT (no download).

SCENARIO_CASE: "healthy" (the framework matrix's run: no incident, the
losses of the run without meshscope); "clip": gradient clipping over all
the parameters, `clip_grad_norm_(model.parameters(), 1.0)`, where the
RMSNorm weights the tp_plan leaves out are plain tensors beside DTensor
gradients (torch._foreach_norm: "got mixed torch.Tensor and DTensor");
"logits": the user's own head, `hidden @ model.lm_head.weight.t()`, over
the last hidden state transformers' hooks hand back as a plain tensor
(aten.mm: "got mixed torch.Tensor and DTensor").

Modelled on public reports of HF tensor parallelism meeting plain tensors:
- https://github.com/huggingface/transformers/issues/36657 (backward and
  the optimizer with tensor parallel: DTensor and plain parameters mixed)
- https://github.com/pytorch/pytorch/issues/152249 (norms over DTensor and
  plain tensors: the workaround by hand)

`--reference`: one process, the same weights without tensor parallelism.
"""

from __future__ import annotations

import os

import torch

from common import finish, reference_mode

STEPS = 3


def model_dir() -> str:
    return os.path.join(os.environ["SCENARIO_OUT"], "tiny-llama")


def save_tiny_llama() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    if os.path.exists(os.path.join(model_dir(), "config.json")):
        return
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(model_dir())


def main() -> None:
    from transformers import LlamaForCausalLM

    rank = 0
    options = {"dtype": torch.float32, "attn_implementation": "eager"}
    if reference_mode():
        save_tiny_llama()
    else:
        import torch.distributed as dist
        from transformers.distributed import DistributedConfig

        dist.init_process_group("gloo")
        rank = dist.get_rank()
        if rank == 0:
            save_tiny_llama()
        dist.barrier()
        options["distributed_config"] = DistributedConfig(tp_plan="auto")
    model = LlamaForCausalLM.from_pretrained(model_dir(), **options)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1234))
    case = os.environ.get("SCENARIO_CASE", "healthy")
    losses = []
    for _ in range(STEPS):
        if case == "logits":  # the user's own head over the last hidden state
            out = model(input_ids=ids, output_hidden_states=True)  # BIRTH logits
            hidden = out.hidden_states[-1]  # plain: transformers' hooks gave it back local
            logits = hidden @ model.lm_head.weight.t()  # INCIDENT logits
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())
        else:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if case == "clip":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # INCIDENT clip
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    finish(rank, losses)


if __name__ == "__main__":
    main()
