#pragma once

// Runs work(i) for every i in [0, n), each index once, on up to one thread
// per core (the calling thread among them), and returns when all are done.
// An index's work runs on one thread from start to end, so what it uses alone
// (a rank's reader, its timeline) needs no lock. An exception work(i) throws
// is rethrown on the calling thread once all are done: that of the lowest
// index, as a loop in order would have thrown first. Once one has thrown, no
// index not yet started is (indices start in order, so every lower one has).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace meshscope {

template <class Work>
void forEachInParallel(size_t n, Work&& work) {
    std::atomic<size_t> next{0};
    std::atomic<bool> anyFailed{false};
    std::vector<std::exception_ptr> failed(n);
    auto worker = [&] {
        for (size_t i; !anyFailed.load(std::memory_order_relaxed) && (i = next++) < n;)
            try {
                work(i);
            } catch (...) {
                failed[i] = std::current_exception();
                anyFailed = true;
            }
    };
    size_t threads =
        std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::max<size_t>(n, 1));
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t)
        pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool)
        t.join();
    for (const std::exception_ptr& e : failed)
        if (e) std::rethrow_exception(e);
}

}  // namespace meshscope
