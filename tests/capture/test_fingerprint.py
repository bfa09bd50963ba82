"""Content fingerprints of promoted tensors (capture/agent/incidents/fingerprint.cpp),
through the extension: computed by ATen ops on the tensor's own device, equal
exactly when dtype, shape and values are equal. The CUDA cases run where a
GPU is present (scripts/gpu_check.sh)."""

from __future__ import annotations

import pytest
import torch

from meshscope import fingerprint

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def sample(dtype: torch.dtype, n: int = 37) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    if dtype == torch.bool:
        return torch.rand(n, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(dtype)


def test_deterministic_and_equal_for_equal_content():
    t = torch.randn(5, 7)
    assert fingerprint(t) == fingerprint(t)
    assert fingerprint(t) == fingerprint(t.clone())
    assert fingerprint(t) != 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool,
                                   torch.float16, torch.bfloat16, torch.int8, torch.uint8])
def test_one_changed_element_changes_it(dtype):
    t = sample(dtype)
    for index in (0, 18, 36):  # first, middle and last (in the padded tail word)
        changed = t.clone()
        changed[index] = ~changed[index] if dtype == torch.bool else changed[index] + 1
        assert not torch.equal(changed, t)
        assert fingerprint(changed) != fingerprint(t), (dtype, index)


def test_element_order_matters():
    t = torch.arange(64, dtype=torch.float32)
    assert fingerprint(t.flip(0)) != fingerprint(t)
    swapped = t.clone()
    swapped[[3, 40]] = swapped[[40, 3]]
    assert fingerprint(swapped) != fingerprint(t)
    rows = t.reshape(8, 8)
    assert fingerprint(rows[torch.randperm(8, generator=torch.Generator().manual_seed(1))]) \
        != fingerprint(rows)


def test_dtype_and_shape_matter():
    t = torch.arange(12, dtype=torch.int32)
    assert fingerprint(t.view(torch.float32)) != fingerprint(t)  # same bytes
    assert fingerprint(t.view(torch.uint8)) != fingerprint(t)
    shapes = {fingerprint(t.reshape(s)) for s in [(12,), (3, 4), (4, 3), (2, 6), (1, 12)]}
    assert len(shapes) == 5
    assert fingerprint(torch.zeros(0, 3)) != fingerprint(torch.zeros(3, 0))


def test_non_contiguous_equals_its_contiguous_copy():
    base = torch.randn(6, 10)
    for view in (base.t(), base[:, ::3], base[1::2], base[0].expand(3, 10)):
        assert not view.is_contiguous()
        assert fingerprint(view) == fingerprint(view.contiguous())
    assert fingerprint(base.t()) != fingerprint(base)
    c = torch.randn(4, dtype=torch.complex64)
    assert fingerprint(c.conj()) == fingerprint(c.conj().resolve_conj())
    assert fingerprint(c.conj()) != fingerprint(c)


def test_sizes_that_are_no_multiple_of_eight_bytes():
    for n in (1, 3, 7, 9, 13):
        t = torch.arange(1, n + 1, dtype=torch.uint8)
        assert fingerprint(t) == fingerprint(t.clone())
        longer = torch.cat([t, torch.zeros(1, dtype=torch.uint8)])  # same padded words
        assert fingerprint(longer) != fingerprint(t)
    assert fingerprint(torch.tensor(3.5)) != fingerprint(torch.tensor([3.5]))  # 0-dim


def test_empty_tensors():
    assert fingerprint(torch.empty(0)) == fingerprint(torch.empty(0))
    assert fingerprint(torch.empty(0)) != fingerprint(torch.empty(0, dtype=torch.int64))
    assert fingerprint(torch.empty(0)) != 0


def test_position_counts_across_the_chunk_boundary():
    words = (1 << 22) + 5  # one more chunk of ATen work than a whole one
    t = torch.arange(words, dtype=torch.int64)
    swapped = t.clone()
    swapped[[10, words - 2]] = swapped[[words - 2, 10]]
    assert fingerprint(swapped) != fingerprint(t)
    assert fingerprint(t) == fingerprint(t.clone())


def test_tensors_without_content_and_dispatch_modes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    assert fingerprint(torch.empty(4, device="meta")) == 0
    mode = FakeTensorMode()
    fake = mode.from_tensor(torch.ones(4))
    assert fingerprint(fake) == 0
    with mode:
        assert fingerprint(fake) == 0

    class Counting(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Counting.calls += 1
            return func(*args, **(kwargs or {}))

    t = torch.randn(9)
    expected = fingerprint(t)
    with Counting():
        assert fingerprint(t) == expected
    assert Counting.calls == 0  # the hash's own ops never reach a user's mode


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool,
                                   torch.float16, torch.bfloat16, torch.int8, torch.complex64])
@pytest.mark.parametrize("n", [0, 1, 7, 37, 1001, (1 << 14) + 3])
def test_the_host_pass_equals_the_aten_ops_a_device_runs(dtype, n):
    """A host tensor is hashed in one C++ pass, a device tensor by ATen ops:
    the same value, so CPU and GPU ranks compare (the chunked ATen sum is
    checked across its chunk boundary too)."""
    from meshscope import _capture

    t = sample(dtype, n) if dtype != torch.complex64 else torch.randn(n, dtype=dtype)
    assert _capture.fingerprint_aten(t) == fingerprint(t)
    assert _capture.fingerprint_aten(t[::3]) == fingerprint(t[::3])


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.float16, torch.bfloat16,
                                   torch.int8])
def test_cpu_and_cuda_agree(dtype):
    t = sample(dtype, 1001)
    assert fingerprint(t.cuda()) == fingerprint(t)
    assert fingerprint(t.cuda()[::2]) == fingerprint(t[::2])


@cuda
def test_cuda_tensor_is_not_copied_to_the_host():
    t = torch.randn(1 << 20, device="cuda")
    fingerprint(t)  # warm up (kernels, allocator)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fingerprint(t)
    # the GPU's copy activities: exactly one, the final 8-byte sum (.item())
    copies = [e.name for e in prof.events() if e.name.startswith("Memcpy DtoH")]
    assert len(copies) == 1, copies
