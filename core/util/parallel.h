#pragma once

// Runs work(i) for every i in [0, n), each index once, on up to one thread
// per core (the calling thread among them), and returns when all are done.
// An index's work runs on one thread from start to end, so what it uses alone
// (a rank's reader, its timeline) needs no lock. `work` must not throw: an
// exception on another thread would end the process.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace meshscope {

template <class Work>
void forEachInParallel(size_t n, Work&& work) {
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t i; (i = next++) < n;)
            work(i);
    };
    size_t threads =
        std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::max<size_t>(n, 1));
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t)
        pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool)
        t.join();
}

}  // namespace meshscope
