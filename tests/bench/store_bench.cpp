// Run-store benchmarks: writer ingest (one producer, events/s into SQLite)
// and reader queries on a 10-million-op rank file.
//
//   build/tests/bench/store_bench                      everything
//   build/tests/bench/store_bench --benchmark_filter=Ingest
//
// The 10M-op file is generated once into $MESHSCOPE_BENCH_DATA (default
// build/bench-data) through the same writer.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "core/store/rank_reader.h"
#include "core/store/rank_writer.h"
#include "core/store/run_directory.h"
#include "core/synth/synthetic_run.h"

namespace meshscope {
namespace {

std::filesystem::path scratchDir() {
    auto dir = std::filesystem::temp_directory_path() / "meshscope-bench";
    std::filesystem::create_directories(dir);
    return dir;
}

// One producer submits `events` records as fast as it can; the time runs
// until the last one is committed. Counters: events/s committed (sustained:
// many times the queue's capacity pass through it), the producer's own cost
// per submit, and drops (0 means the writer kept up).
void ingest(benchmark::State& state, int operands) {
    const int64_t events = state.range(0);
    for (auto _ : state) {
        auto file = scratchDir() / "ingest.msdb";
        for (const char* suffix : {"", "-wal", "-shm"})
            std::filesystem::remove(file.string() + suffix);
        // Default options: the bounded queue of a real rank. If the writer
        // could not keep up, records would be dropped and show in `drops`.
        auto w = RankWriter::create(file, {});
        StringId names[4] = {w->intern("aten::mm"), w->intern("aten::add.Tensor"),
                             w->intern("aten::relu"), w->intern("aten::sum")};
        StringId placement = w->intern("[Shard(0)]");
        auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < events; ++i) {
            OpRecord op;
            op.startNs = w->nowNs();
            op.endNs = op.startNs + 100;
            op.name = names[i & 3];
            op.step = i / 10000;
            for (int k = 0; k < operands; ++k)
                op.operands.push_back({uint16_t(k), OperandRole::Input, OperandKind::Tensor,
                                       TensorId{k + 1}, 0, placement});
            w->submit(std::move(op));
        }
        auto submitted = std::chrono::steady_clock::now();
        w->flushNow();
        auto committed = std::chrono::steady_clock::now();
        WriterStats stats = w->stats();
        w->close();
        double total = std::chrono::duration<double>(committed - start).count();
        state.SetIterationTime(total);
        state.counters["events_per_s"] = double(stats.written) / total;
        state.counters["submit_ns"] =
            std::chrono::duration<double, std::nano>(submitted - start).count() / double(events);
        uint64_t drops = 0;
        for (auto d : stats.drops)
            drops += d;
        state.counters["drops"] = double(drops);
    }
}

void BM_WriterIngest_Ops(benchmark::State& state) {
    ingest(state, 0);
}
void BM_WriterIngest_OpsWith2Operands(benchmark::State& state) {
    ingest(state, 2);
}
BENCHMARK(BM_WriterIngest_Ops)
    ->Arg(2'000'000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_WriterIngest_OpsWith2Operands)
    ->Arg(1'000'000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The training-thread view: a producer paced at state.range(0) events/s for
// two seconds, in bursts of 1000 every millisecond. Reports the committed
// rate, drops, and the worst single submit() (the producer must never block).
void BM_WriterPaced(benchmark::State& state) {
    const int64_t rate = state.range(0);
    const bool withOperands = state.range(1) != 0;
    const int64_t burst = 1000;
    const auto period = std::chrono::nanoseconds(1'000'000'000LL * burst / rate);
    for (auto _ : state) {
        auto file = scratchDir() / "paced.msdb";
        for (const char* suffix : {"", "-wal", "-shm"})
            std::filesystem::remove(file.string() + suffix);
        auto w = RankWriter::create(file, {});
        StringId name = w->intern("aten::mm");
        StringId placement = w->intern("[Shard(0)]");
        double worstNs = 0;
        int64_t slow = 0;  // submits over 100 µs (preemption on a shared machine, page faults)
        auto start = std::chrono::steady_clock::now();
        auto next = start;
        int64_t submitted = 0;
        while (next - start < std::chrono::seconds(2)) {
            std::this_thread::sleep_until(next);
            for (int64_t i = 0; i < burst; ++i) {
                auto t0 = std::chrono::steady_clock::now();
                OpRecord op;
                op.startNs = w->nowNs();
                op.endNs = op.startNs + 100;
                op.name = name;
                if (withOperands)
                    op.operands.push_back(
                        {0, OperandRole::Input, OperandKind::Tensor, TensorId{1}, 0, placement});
                w->submit(std::move(op));
                double ns =
                    std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                        .count();
                worstNs = std::max(worstNs, ns);
                slow += ns > 100'000;
            }
            submitted += burst;
            next += period;
        }
        w->flushNow();
        double total =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        WriterStats stats = w->stats();
        w->close();
        state.SetIterationTime(total);
        uint64_t drops = 0;
        for (auto d : stats.drops)
            drops += d;
        state.counters["events_per_s"] = double(stats.written) / total;
        state.counters["drops"] = double(drops);
        state.counters["worst_submit_us"] = worstNs / 1000;
        state.counters["submits_over_100us"] = double(slow);
    }
}
BENCHMARK(BM_WriterPaced)
    ->Args({1'000'000, 0})
    ->Args({1'000'000, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The 10M-op rank file, made once.
const RankReader& bigRank() {
    static RankReader reader = [] {
        const char* env = std::getenv("MESHSCOPE_BENCH_DATA");
        std::filesystem::path dir = env ? env : "bench-data";
        auto run = dir / "run-10M";
        if (!std::filesystem::exists(rankFilePath(run, 0))) {
            std::filesystem::remove_all(run);
            SyntheticRunSpec spec;
            spec.ranks = 1;
            spec.layers = 8;
            spec.opsPerRank = 10'000'000;
            auto t0 = std::chrono::steady_clock::now();
            writeSyntheticRun(run, spec);
            std::fprintf(
                stderr, "generated %s in %.1f s\n", run.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        return RankReader::open(rankFilePath(run, 0));
    }();
    return reader;
}

// Random windows of the given width (µs) anywhere in the run.
void BM_ReaderTimeRange(benchmark::State& state) {
    const RankReader& r = bigRank();
    RankSummary s = r.summary();
    std::mt19937_64 rng(1);
    int64_t width = state.range(0) * 1000;
    int64_t rows = 0;
    for (auto _ : state) {
        int64_t t0 = s.firstNs + int64_t(rng() % uint64_t(s.lastNs - s.firstNs - width));
        auto ops = r.opsInTimeRange(t0, t0 + width);
        rows += int64_t(ops.size());
        benchmark::DoNotOptimize(ops);
    }
    state.counters["ops_in_run"] = double(s.ops);
    state.counters["rows_per_query"] = double(rows) / double(state.iterations());
    state.SetItemsProcessed(rows);
}
BENCHMARK(BM_ReaderTimeRange)->Arg(100)->Arg(10'000)->Unit(benchmark::kMicrosecond);

void BM_ReaderStepRange(benchmark::State& state) {
    const RankReader& r = bigRank();
    int64_t steps = r.summary().steps;
    std::mt19937_64 rng(2);
    int64_t rows = 0;
    for (auto _ : state) {
        int64_t s0 = int64_t(rng() % uint64_t(steps - 1));
        auto ops = r.opsInStepRange(s0, s0);
        rows += int64_t(ops.size());
        benchmark::DoNotOptimize(ops);
    }
    state.counters["rows_per_query"] = double(rows) / double(state.iterations());
    state.SetItemsProcessed(rows);
}
BENCHMARK(BM_ReaderStepRange)->Unit(benchmark::kMicrosecond);

void BM_ReaderIncidentsInStep(benchmark::State& state) {
    const RankReader& r = bigRank();
    int64_t steps = r.summary().steps;
    std::mt19937_64 rng(3);
    for (auto _ : state) {
        int64_t s0 = int64_t(rng() % uint64_t(steps - 1));
        benchmark::DoNotOptimize(r.incidentsInStepRange(s0, s0 + 9));
    }
}
BENCHMARK(BM_ReaderIncidentsInStep)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace meshscope

BENCHMARK_MAIN();
