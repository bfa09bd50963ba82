#pragma once

// Position-by-position comparison of several ranks' sequences (op names per
// thread, incident groups): where each rank first departs from the majority.
// Used across the ranks of one run (analysis) and between the same rank of
// two runs (diff).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/analysis/recording_reach.h"
#include "core/analysis/run_analysis.h"

namespace meshscope {

class SequenceComparer {
  public:
    struct Entry {
        int64_t value = -1;  // >= 0; ids are the caller's
        int64_t step = -1;
        StackId stack;         // its user frame in its rank's file (ops), or none
        bool nearest = false;  // `stack` is the nearest earlier one: the entry had none
    };
    using Describe = std::function<std::string(int64_t)>;
    using SiteOf = std::function<SourceFrame(int64_t)>;
    // The call site of a rank's entry (`stack` resolved in that rank's file).
    using EntrySite = std::function<SourceFrame(int rank, const Entry&)>;

    SequenceComparer(Divergence::Kind kind, uint32_t thread, std::vector<int> ranks);

    void push(int rank, Entry entry);
    // The rank's sequence has no more entries.
    void setEnded(int rank);
    // Its sequence ends before the rank did (a killed rank, lost records, a
    // live run: RecordingReach): once it has no entry left it leaves the
    // comparison without a divergence.
    void setTruncated(int rank);
    // Compares every position that all ranks still compared have; returns
    // when a rank that has not ended has no entry left. Appends the first
    // departure of each rank to `out`; a departed rank is compared no more.
    // At each position the majority wins; ties go to a value over the end of
    // a sequence, then to the value of the lowest rank.
    // `entrySite` gives both sides a call site (Divergence::site and
    // expectedSite) from the entries' stacks.
    void compare(const Describe& describe, std::vector<Divergence>& out, const SiteOf& siteOf = {},
                 const EntrySite& entrySite = {});

  private:
    Divergence::Kind m_kind;
    uint32_t m_thread;
    std::vector<int> m_ranks;
    std::map<int, std::deque<Entry>> m_queues;
    std::set<int> m_ended, m_diverged, m_truncated;
    int64_t m_index = 0;
};

struct RankStream {
    const RankReader* reader = nullptr;
    int id = 0;  // how divergences name it
    // How far its recording reaches; null: all of it.
    const RecordingReach* reach = nullptr;
};

// Streams the ops of every rank (in pages, bounded memory) and compares their
// op-name sequences thread by thread. Returns the number of ops read.
int64_t compareOpSequences(const std::vector<RankStream>& ranks, std::vector<Divergence>& out,
                           const std::function<void(int64_t done)>& progress = {});

// Compares the ranks' collective sequences in the order each rank issued
// them (kind and group, and bytes where every rank must send as many): the
// first collective one rank issued where the others issued another or none,
// the call that waits forever in a hang, each named with its call site. A
// record missing from a rank's sequence (lost) ends what is compared of it.
// Returns the number of collectives read.
int64_t compareCollectiveSequences(const std::vector<RankStream>& ranks,
                                   std::vector<Divergence>& out);

}  // namespace meshscope
