#include "capture/agent/incidents/fingerprint.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/util/content_hash.h"

namespace meshscope::capture {
namespace {

// Words hashed per round of ATen ops. Bounds the memory the hash borrows
// (two int64 temporaries of this length) whatever the tensor's size; on the
// CPU small enough to stay in cache, on a GPU large enough to keep the
// number of kernel launches small.
constexpr int64_t kCpuChunkWords = int64_t(1) << 14;
constexpr int64_t kDeviceChunkWords = int64_t(1) << 22;

// splitmix64's constants as the int64 bit patterns ATen computes with.
constexpr int64_t kGolden = static_cast<int64_t>(0x9E3779B97F4A7C15ull);
constexpr int64_t kMul1 = static_cast<int64_t>(0xBF58476D1CE4E5B9ull);
constexpr int64_t kMul2 = static_cast<int64_t>(0x94D049BB133111EBull);

// x >> s on the uint64 bit pattern: ATen shifts int64 arithmetically, so the
// copies of the sign bit are masked off.
at::Tensor shiftRightLogical(const at::Tensor& x, int s) {
    return at::bitwise_and(at::bitwise_right_shift(x, s), (int64_t(1) << (64 - s)) - 1);
}

// splitmix64's finalizer on every element, in place (int64 products wrap
// like uint64 ones).
void mixInPlace(at::Tensor& x) {
    x.bitwise_xor_(shiftRightLogical(x, 30));
    x.mul_(kMul1);
    x.bitwise_xor_(shiftRightLogical(x, 27));
    x.mul_(kMul2);
    x.bitwise_xor_(shiftRightLogical(x, 31));
}

// A contiguous tensor's bytes as int64 words, the tail padded with zeros
// (the byte length is hashed beside, so padding cannot collide).
at::Tensor asWords(const at::Tensor& contiguous) {
    at::Tensor flat = contiguous.reshape({-1});
    // one element counts as contiguous whatever its stride; view() needs 1
    if (flat.numel() == 1 && flat.stride(0) != 1) flat = flat.as_strided({1}, {1});
    at::Tensor bytes = flat.view(at::kByte);
    int64_t pad = (8 - bytes.numel() % 8) % 8;
    if (pad) bytes = at::constant_pad_nd(bytes, {0, pad});
    return bytes.view(at::kLong);
}

// Wrap-around sum over i of mix(word[i] ^ i * golden): every word counts,
// and where it stands. Integer sums wrap the same in any order and chunking,
// so every device gives the same value. Stays on the words' device.
at::Tensor wordSum(const at::Tensor& words) {
    int64_t chunk = words.is_cpu() ? kCpuChunkWords : kDeviceChunkWords;
    at::Tensor total = at::zeros({}, words.options());
    for (int64_t first = 0; first < words.numel(); first += chunk) {
        int64_t n = std::min(chunk, words.numel() - first);
        at::Tensor x = at::arange(first, first + n, words.options());
        x.mul_(kGolden).bitwise_xor_(words.narrow(0, first, n));
        mixInPlace(x);
        total.add_(x.sum());
    }
    return total;
}

// The same sum as wordSum, computed in one pass over a host tensor's bytes
// (a little-endian word per 8 bytes, the tail padded with zeros, as
// asWords views them): no temporaries and no ATen op per pass, which on a
// CPU made the replica check's fingerprints cost as much as a training step.
int64_t hostWordSum(const at::Tensor& contiguous) {
    const auto* bytes = static_cast<const uint8_t*>(contiguous.data_ptr());
    int64_t size = contiguous.numel() * int64_t(contiguous.element_size());
    auto mixed = [](int64_t i, uint64_t word) {
        uint64_t x = (uint64_t(i) * uint64_t(kGolden)) ^ word;
        x ^= x >> 30;
        x *= uint64_t(kMul1);
        x ^= x >> 27;
        x *= uint64_t(kMul2);
        return x ^ (x >> 31);
    };
    uint64_t total = 0;
    int64_t whole = size / 8;
    for (int64_t i = 0; i < whole; ++i) {
        uint64_t word;
        std::memcpy(&word, bytes + i * 8, 8);  // a fixed size: one load, no call
        total += mixed(i, word);
    }
    if (int64_t tail = size - whole * 8) {
        uint64_t word = 0;
        std::memcpy(&word, bytes + whole * 8, size_t(tail));
        total += mixed(whole, word);
    }
    return int64_t(total);
}

}  // namespace

uint64_t fingerprintTensor(const at::Tensor& tensor, bool atenOnly) {
    // Fake and meta tensors (while torch.compile traces) have no content.
    if (tensor.is_meta() || tensor.key_set().has(c10::DispatchKey::Python)) return 0;
    // Plain tensor ops only: no dispatch mode (a FakeTensorMode while Dynamo
    // traces) may intercept the ops below.
    c10::impl::ExcludeDispatchKeyGuard noModes(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
    at::Tensor t = tensor.detach().resolve_conj().resolve_neg().contiguous();
    int64_t bytes = t.numel() * int64_t(t.element_size());
    // On a device, the one device-to-host transfer: 8 bytes.
    int64_t sum = !bytes                    ? 0
                  : t.is_cpu() && !atenOnly ? hostWordSum(t)
                                            : wordSum(asWords(t)).item<int64_t>();
    ContentHash hash;
    hash.update(std::string_view(c10::toString(t.scalar_type())));
    hash.update(t.sizes().data(), t.sizes().size() * sizeof(int64_t));
    hash.update(&bytes, sizeof bytes);
    hash.update(&sum, sizeof sum);
    return hash.digest();
}

}  // namespace meshscope::capture
