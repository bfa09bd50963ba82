// ncclsim: a c10d backend for the tests that behaves like NCCL where NCCL
// differs from gloo, on the CPU, so CI catches what only GPUs showed
// (STYLE.md 18). It runs every collective through a gloo backend and wraps
// the work:
//
// - A synchronous collective (async_op=False) returns no work, as NCCL's
//   do since torch 2.8.
// - Work::wait() returns once the data is there (on a GPU: once the current
//   stream waits for the collective) and never raises: NCCL reports errors
//   asynchronously, not from wait().
// - Work::isCompleted() turns true only MESHSCOPE_NCCLSIM_LATE_MS (default
//   300) after gloo finished: completion "on the device" comes after wait()
//   returned on the host.
// - Its watchdog thread, like ProcessGroupNCCL's with
//   TORCH_NCCL_ASYNC_ERROR_HANDLING=3 (the default), takes the process down
//   with std::abort() once a collective failed or ran past its timeout,
//   after printing NCCL's message.
//
// Registered as backend "ncclsim" by tests/capture/scenarios/ncclsim.py.

#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <pybind11/chrono.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace ncclsim {
namespace {

using Clock = std::chrono::steady_clock;
using c10d::Work;

std::chrono::milliseconds lateBy() {
    const char* text = std::getenv("MESHSCOPE_NCCLSIM_LATE_MS");
    return std::chrono::milliseconds(text ? std::atoll(text) : 300);
}

class SimWork : public Work {
  public:
    SimWork(c10::intrusive_ptr<Work> inner, int rank, c10d::OpType type, uint64_t seq,
            std::chrono::milliseconds timeout)
        : Work(rank, type),
          m_inner(std::move(inner)),
          m_seq(seq),
          m_timeout(timeout),
          m_issued(Clock::now()) {}

    bool wait(std::chrono::milliseconds) override {
        try {
            m_inner->wait();
        } catch (...) {  // reported by the watchdog, as NCCL does
        }
        stampDone();
        return true;
    }
    bool isCompleted() override {
        // done once gloo says so or its wait returned (gloo's reduce-scatter
        // works never say so), and reported late
        if (m_inner->isCompleted()) stampDone();
        return m_done.load() != 0 && Clock::now() - doneAt() >= lateBy();
    }
    bool isSuccess() const override { return !m_inner->exception(); }
    std::exception_ptr exception() const override { return m_inner->exception(); }
    std::vector<at::Tensor> result() override { return m_inner->result(); }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return m_inner->getFuture(); }
    void synchronize() override {}

    // The watchdog's view: an error, or past the timeout without completing.
    std::string trouble() const {
        if (m_inner->isCompleted() || m_done.load()) {
            if (std::exception_ptr e = m_inner->exception()) try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    return std::string("failed: ") + x.what();
                }
            return {};
        }
        auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - m_issued);
        if (ran > m_timeout)
            return "ran for " + std::to_string(ran.count()) + " milliseconds before timing out";
        return {};
    }
    bool finished() const { return m_inner->isCompleted() || m_done.load() != 0; }
    uint64_t seq() const { return m_seq; }
    c10d::OpType type() const { return opType_; }

  private:
    void stampDone() {
        int64_t expected = 0;
        m_done.compare_exchange_strong(expected, Clock::now().time_since_epoch().count());
    }
    Clock::time_point doneAt() const { return Clock::time_point(Clock::duration(m_done.load())); }

    c10::intrusive_ptr<Work> m_inner;
    uint64_t m_seq;
    std::chrono::milliseconds m_timeout;
    Clock::time_point m_issued;
    std::atomic<int64_t> m_done{0};
};

class SimBackend : public c10d::Backend {
  public:
    // `gloo`: the gloo backend of the same ranks (made in Python: torch ships
    // no gloo headers).
    SimBackend(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size,
               std::chrono::milliseconds timeout)
        : Backend(rank, size), m_gloo(std::move(gloo)), m_timeout(timeout) {
        m_watchdog = std::thread([this] { watch(); });
    }
    ~SimBackend() override {
        {
            std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_wake.notify_all();
        if (m_watchdog.joinable()) m_watchdog.join();
    }

    const std::string getBackendName() const override { return "ncclsim"; }

    c10::intrusive_ptr<Work> broadcast(std::vector<at::Tensor>& t,
                                       const c10d::BroadcastOptions& o) override {
        return track(m_gloo->broadcast(t, o), c10d::OpType::BROADCAST, o.asyncOp);
    }
    c10::intrusive_ptr<Work> allreduce(std::vector<at::Tensor>& t,
                                       const c10d::AllreduceOptions& o) override {
        return track(m_gloo->allreduce(t, o), c10d::OpType::ALLREDUCE, o.asyncOp);
    }
    c10::intrusive_ptr<Work> allreduce_coalesced(
        std::vector<at::Tensor>& t, const c10d::AllreduceCoalescedOptions& o) override {
        return track(m_gloo->allreduce_coalesced(t, o), c10d::OpType::ALLREDUCE_COALESCED,
                     o.asyncOp);
    }
    c10::intrusive_ptr<Work> reduce(std::vector<at::Tensor>& t,
                                    const c10d::ReduceOptions& o) override {
        return track(m_gloo->reduce(t, o), c10d::OpType::REDUCE, o.asyncOp);
    }
    c10::intrusive_ptr<Work> allgather(std::vector<std::vector<at::Tensor>>& out,
                                       std::vector<at::Tensor>& in,
                                       const c10d::AllgatherOptions& o) override {
        return track(m_gloo->allgather(out, in, o), c10d::OpType::ALLGATHER, o.asyncOp);
    }
    c10::intrusive_ptr<Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                             const c10d::AllgatherOptions& o) override {
        return track(m_gloo->_allgather_base(out, in, o), c10d::OpType::_ALLGATHER_BASE, o.asyncOp);
    }
    c10::intrusive_ptr<Work> allgather_into_tensor_coalesced(
        std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
        const c10d::AllgatherOptions& o) override {
        return track(m_gloo->allgather_into_tensor_coalesced(out, in, o), c10d::OpType::COALESCED,
                     o.asyncOp);
    }
    c10::intrusive_ptr<Work> gather(std::vector<std::vector<at::Tensor>>& out,
                                    std::vector<at::Tensor>& in,
                                    const c10d::GatherOptions& o) override {
        return track(m_gloo->gather(out, in, o), c10d::OpType::GATHER, o.asyncOp);
    }
    c10::intrusive_ptr<Work> scatter(std::vector<at::Tensor>& out,
                                     std::vector<std::vector<at::Tensor>>& in,
                                     const c10d::ScatterOptions& o) override {
        return track(m_gloo->scatter(out, in, o), c10d::OpType::SCATTER, o.asyncOp);
    }
    c10::intrusive_ptr<Work> reduce_scatter(std::vector<at::Tensor>& out,
                                            std::vector<std::vector<at::Tensor>>& in,
                                            const c10d::ReduceScatterOptions& o) override {
        return track(m_gloo->reduce_scatter(out, in, o), c10d::OpType::REDUCE_SCATTER, o.asyncOp);
    }
    c10::intrusive_ptr<Work> _reduce_scatter_base(at::Tensor& out, at::Tensor& in,
                                                  const c10d::ReduceScatterOptions& o) override {
        return track(m_gloo->_reduce_scatter_base(out, in, o), c10d::OpType::_REDUCE_SCATTER_BASE,
                     o.asyncOp);
    }
    c10::intrusive_ptr<Work> reduce_scatter_tensor_coalesced(
        std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
        const c10d::ReduceScatterOptions& o) override {
        return track(m_gloo->reduce_scatter_tensor_coalesced(out, in, o), c10d::OpType::COALESCED,
                     o.asyncOp);
    }
    c10::intrusive_ptr<Work> alltoall_base(at::Tensor& out, at::Tensor& in,
                                           std::vector<int64_t>& outSplits,
                                           std::vector<int64_t>& inSplits,
                                           const c10d::AllToAllOptions& o) override {
        return track(m_gloo->alltoall_base(out, in, outSplits, inSplits, o),
                     c10d::OpType::ALLTOALL_BASE, o.asyncOp);
    }
    c10::intrusive_ptr<Work> alltoall(std::vector<at::Tensor>& out, std::vector<at::Tensor>& in,
                                      const c10d::AllToAllOptions& o) override {
        return track(m_gloo->alltoall(out, in, o), c10d::OpType::ALLTOALL, o.asyncOp);
    }
    c10::intrusive_ptr<Work> send(std::vector<at::Tensor>& t, int dst, int tag) override {
        return track(m_gloo->send(t, dst, tag), c10d::OpType::SEND);
    }
    c10::intrusive_ptr<Work> recv(std::vector<at::Tensor>& t, int src, int tag) override {
        return track(m_gloo->recv(t, src, tag), c10d::OpType::RECV);
    }
    c10::intrusive_ptr<Work> recvAnysource(std::vector<at::Tensor>& t, int tag) override {
        return track(m_gloo->recvAnysource(t, tag), c10d::OpType::RECVANYSOURCE);
    }
    c10::intrusive_ptr<Work> barrier(const c10d::BarrierOptions& o) override {
        return track(m_gloo->barrier(o), c10d::OpType::BARRIER);
    }

  private:
    // A synchronous call (`asyncOp` false) returns no work, as
    // ProcessGroupNCCL's do since torch 2.8 (`return asyncOp ? work :
    // nullptr`: NCCL runs it on the current stream; here it is done when the
    // call returns); its errors reach the watchdog, not the caller.
    c10::intrusive_ptr<Work> track(c10::intrusive_ptr<Work> inner, c10d::OpType type,
                                   bool asyncOp = true) {
        auto work = c10::make_intrusive<SimWork>(std::move(inner), rank_, type, ++m_seq, m_timeout);
        {
            std::lock_guard lock(m_mutex);
            m_works.push_back(work);
        }
        if (asyncOp) return work;
        work->wait(m_timeout);
        return {};
    }

    // ProcessGroupNCCL's watchdog, as its default error handling behaves.
    void watch() {
        std::unique_lock lock(m_mutex);
        while (!m_wake.wait_for(lock, std::chrono::milliseconds(100), [this] { return m_stop; })) {
            for (auto it = m_works.begin(); it != m_works.end();) {
                std::string trouble = (*it)->trouble();
                if (!trouble.empty()) {
                    std::fprintf(stderr,
                                 "[rank%d]:[E] [PG ncclsim Rank %d] Watchdog caught collective "
                                 "operation timeout or error: WorkNCCL(SeqNum=%llu, OpType=%s) "
                                 "%s\n[rank%d]:[E] Some NCCL operations have failed or timed out. "
                                 "Due to the asynchronous nature of CUDA kernels, subsequent GPU "
                                 "operations might run on corrupted/incomplete data. To avoid "
                                 "data inconsistency, we are taking the entire process down.\n",
                                 rank_, rank_, static_cast<unsigned long long>((*it)->seq()),
                                 c10d::opTypeToString((*it)->type()).c_str(), trouble.c_str(),
                                 rank_);
                    std::fflush(stderr);
                    std::abort();
                }
                it = (*it)->finished() ? m_works.erase(it) : std::next(it);
            }
        }
    }

    c10::intrusive_ptr<c10d::Backend> m_gloo;
    std::chrono::milliseconds m_timeout;
    uint64_t m_seq = 0;
    std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stop = false;
    std::deque<c10::intrusive_ptr<SimWork>> m_works;
    std::thread m_watchdog;
};

}  // namespace
}  // namespace ncclsim

PYBIND11_MODULE(_ncclsim, m) {
    namespace py = pybind11;
    py::module_::import("torch.distributed");  // registers c10d::Backend with pybind11
    py::class_<ncclsim::SimBackend, c10d::Backend, c10::intrusive_ptr<ncclsim::SimBackend>>(
        m, "SimBackend")
        .def(py::init([](c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size,
                         std::chrono::milliseconds timeout) {
                 return c10::make_intrusive<ncclsim::SimBackend>(std::move(gloo), rank, size,
                                                                 timeout);
             }),
             py::arg("gloo"), py::arg("rank"), py::arg("size"), py::arg("timeout"));
}
