#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "app/cli/cli.h"
#include "core/synth/synthetic_run.h"

namespace meshscope::cli {

Command addSynth(CLI::App& app) {
    struct Options {
        std::string out;
        SyntheticRunSpec spec;
        int64_t stragglerMs = 20;
    };
    auto o = std::make_shared<Options>();
    auto* sub = app.add_subcommand("synth", "Write a synthetic run (demo, benchmarks)");
    sub->add_option("-o,--output", o->out, "Run directory to create")->required();
    sub->add_option("--ranks", o->spec.ranks, "Number of ranks")->check(CLI::Range(1, 4096));
    sub->add_option("--steps", o->spec.steps, "Optimizer steps")->check(CLI::Range(1, 100000000));
    sub->add_option("--layers", o->spec.layers, "Layers per step")->check(CLI::Range(1, 1000));
    sub->add_option("--ops-per-rank", o->spec.opsPerRank,
                    "Approximate ops per rank (overrides --steps)");
    sub->add_option("--incidents-per-step", o->spec.incidentsPerStep)->check(CLI::Range(0, 1000));
    sub->add_option("--seed", o->spec.seed);
    sub->add_flag("--failures", o->spec.failures,
                  "End as a broken job: no sharding strategy, a DTensor error, a hang in "
                  "mismatched collectives, ranks left unclosed");
    sub->add_option("--straggler", o->spec.straggler,
                    "A rank whose input is slower every step; the others wait for it in the "
                    "gradient all-reduce")
        ->check(CLI::Range(0, 4095));
    sub->add_option("--straggler-ms", o->stragglerMs, "How much slower, in ms")
        ->check(CLI::Range(0, 3600000))
        ->capture_default_str();
    sub->add_flag("--drift", o->spec.drift,
                  "Record the replica check's fingerprints, with one layer's norm drifting "
                  "apart across ranks (an unreduced gradient)");
    return {sub, [o] {
                o->spec.stragglerNs = o->stragglerMs * 1'000'000;
                if (std::filesystem::exists(o->out) && !std::filesystem::is_empty(o->out)) {
                    std::cerr << "meshscope: " << o->out << ": already exists and is not empty\n";
                    return kExitUsage;
                }
                auto totals = writeSyntheticRun(o->out, o->spec);
                fmt::print("wrote {}: {} ranks, {} ops, {} incidents, {} steps\n", o->out,
                           o->spec.ranks, totals.ops, totals.incidents, totals.steps);
                return kExitOk;
            }};
}

}  // namespace meshscope::cli
