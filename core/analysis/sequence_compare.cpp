#include "core/analysis/sequence_compare.h"

#include "core/store/op_chunk.h"
#include "core/util/parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace meshscope {
namespace {

constexpr int64_t kEnd = -1;
// Ops read from each rank per round, and what a round may hold in all: the
// comparers queue every op read until all ranks have theirs, so the page
// shrinks with the number of ranks (never below a chunk, kMaxOpsPerChunk).
constexpr int64_t kOpPage = 65536;
constexpr int64_t kOpsPerRound = int64_t(1) << 21;
// Pages of up to this many ranks, and this many ops in all (about 8 MiB
// held), are read side by side before they are compared.
constexpr size_t kRanksReadTogether = 32;
constexpr int64_t kOpsReadTogether = int64_t(1) << 18;

int64_t referenceValue(const std::vector<std::pair<int, int64_t>>& values) {
    std::map<int64_t, std::pair<int, int>> tally;  // value -> (count, lowest rank)
    for (const auto& [rank, v] : values) {
        auto [it, fresh] = tally.try_emplace(v, 0, rank);
        ++it->second.first;
        it->second.second = std::min(it->second.second, rank);
    }
    int64_t best = kEnd;
    std::tuple<int, int, int> bestKey{-1, 0, 0};
    for (const auto& [v, t] : tally) {
        std::tuple<int, int, int> key{t.first, v != kEnd, -t.second};
        if (key > bestKey) bestKey = key, best = v;
    }
    return best;
}

// Global ids for op names, so ranks' interned ids can be compared. Small
// interned ids (every op name of a normal run) are cached in a vector;
// larger ones, which a damaged file may hold, in a map: nothing is sized by
// an id read from a file.
class NameIds {
  public:
    int64_t id(const RankReader& rank, int stream, StringId name) {
        Cache& cache = m_perStream[stream];
        uint64_t i = uint64_t(name.value());
        if (i < kDenseIds) {
            if (i >= cache.dense.size()) cache.dense.resize(size_t(i) + 1, -1);
            if (cache.dense[i] < 0) cache.dense[i] = global(rank, name);
            return cache.dense[i];
        }
        auto [it, fresh] = cache.sparse.try_emplace(name.value(), 0);
        if (fresh) it->second = global(rank, name);
        return it->second;
    }
    const std::string& name(int64_t id) const { return m_names[size_t(id)]; }

  private:
    static constexpr uint64_t kDenseIds = 1 << 16;
    struct Cache {
        std::vector<int64_t> dense;  // index = StringId value, -1 until seen
        std::unordered_map<int64_t, int64_t> sparse;
    };

    int64_t global(const RankReader& rank, StringId name) {
        std::string text = rank.string(name);
        auto [it, fresh] = m_ids.try_emplace(text, int64_t(m_names.size()));
        if (fresh) m_names.push_back(text);
        return it->second;
    }

    std::unordered_map<std::string, int64_t> m_ids;
    std::vector<std::string> m_names;
    std::map<int, Cache> m_perStream;
};

}  // namespace

SequenceComparer::SequenceComparer(Divergence::Kind kind, uint32_t thread, std::vector<int> ranks)
    : m_kind(kind), m_thread(thread), m_ranks(std::move(ranks)) {}

void SequenceComparer::push(int rank, Entry entry) {
    if (!m_diverged.count(rank)) m_queues[rank].push_back(entry);
}

void SequenceComparer::setEnded(int rank) {
    m_ended.insert(rank);
}

void SequenceComparer::setTruncated(int rank) {
    m_truncated.insert(rank);
}

void SequenceComparer::compare(const Describe& describe, std::vector<Divergence>& out,
                               const SiteOf& siteOf, const EntrySite& entrySite) {
    // The queues of the ranks still compared, for the common case: every
    // one of them has the same next entry (no allocation, no lookup).
    std::vector<std::deque<Entry>*> live;
    auto liveQueues = [&] {
        live.clear();
        for (int r : m_ranks)
            if (!m_diverged.count(r)) live.push_back(&m_queues[r]);
    };
    liveQueues();
    for (;;) {
        if (live.size() >= 2 && !live.front()->empty()) {
            int64_t next = live.front()->front().value;
            bool same = std::all_of(live.begin(), live.end(), [&](const std::deque<Entry>* q) {
                return !q->empty() && q->front().value == next;
            });
            if (same) {
                for (std::deque<Entry>* q : live)
                    q->pop_front();
                ++m_index;
                continue;
            }
        }
        std::vector<std::pair<int, int64_t>> values;
        for (int r : m_ranks) {
            if (m_diverged.count(r)) continue;
            auto& q = m_queues[r];
            if (q.empty() && !m_ended.count(r)) return;
            if (q.empty() && m_truncated.count(r)) {  // its recording ends here, not the rank
                m_diverged.insert(r);
                continue;
            }
            values.emplace_back(r, q.empty() ? kEnd : q.front().value);
        }
        if (values.size() < 2) return;
        if (std::all_of(values.begin(), values.end(),
                        [](const auto& v) { return v.second == kEnd; }))
            return;
        int64_t reference = referenceValue(values);
        std::vector<int> agreeing;
        int64_t referenceStep = -1;
        for (const auto& [r, v] : values) {
            if (v != reference) continue;
            agreeing.push_back(r);
            if (!m_queues[r].empty()) referenceStep = m_queues[r].front().step;
        }
        for (const auto& [r, v] : values) {
            if (v == reference) continue;
            Divergence d;
            d.kind = m_kind;
            d.rank = r;
            d.thread = m_thread;
            d.index = m_index;
            d.step = v == kEnd ? referenceStep : m_queues[r].front().step;
            d.expected = reference == kEnd ? "" : describe(reference);
            d.actual = v == kEnd ? "" : describe(v);
            d.others = agreeing;
            if (siteOf) d.site = siteOf(v == kEnd ? reference : v);
            if (entrySite) {
                int first = agreeing.front();
                const Entry* mine = v == kEnd ? nullptr : &m_queues[r].front();
                const Entry* theirs = reference == kEnd || m_queues[first].empty()
                                          ? nullptr
                                          : &m_queues[first].front();
                if (mine) d.site = entrySite(r, *mine);
                if (theirs) d.expectedSite = entrySite(first, *theirs);
                d.siteIsNearest = (mine && mine->nearest) || (theirs && theirs->nearest);
            }
            out.push_back(std::move(d));
            m_diverged.insert(r);
            m_queues[r].clear();
        }
        for (int r : agreeing)
            if (!m_queues[r].empty()) m_queues[r].pop_front();
        ++m_index;
        liveQueues();  // a rank may have departed or left the comparison
    }
}

int64_t compareOpSequences(const std::vector<RankStream>& ranks, std::vector<Divergence>& out,
                           const std::function<void(int64_t)>& progress) {
    std::vector<int> ids;
    for (const RankStream& r : ranks)
        ids.push_back(r.id);
    NameIds names;
    std::map<uint32_t, SequenceComparer> comparers;
    std::vector<OpSeq> last(ranks.size());
    std::vector<bool> done(ranks.size(), false);
    auto describe = [&](int64_t id) { return names.name(id); };
    // Call sites of the ops that differ, resolved in their rank's file. An op
    // with no user frame (autograd's threads, torch's own code) takes the
    // nearest earlier one on its thread.
    std::map<std::pair<int, int64_t>, SourceFrame> sites;
    std::map<int, const RankReader*> readerOf;
    for (const RankStream& r : ranks)
        readerOf[r.id] = r.reader;
    auto entrySite = [&](int rank, const SequenceComparer::Entry& e) -> SourceFrame {
        if (!e.stack) return {};
        auto [it, fresh] = sites.try_emplace({rank, e.stack.value()});
        if (fresh) {
            std::vector<SourceFrame> frames = resolveStack(*readerOf[rank], e.stack);
            if (!frames.empty()) it->second = frames.front();
        }
        return it->second;
    };
    // The last user frame of each (rank index, thread): few threads a rank.
    std::vector<std::vector<std::pair<uint32_t, StackId>>> lastStack(ranks.size());
    auto lastStackOf = [&](size_t i, uint32_t thread) -> StackId& {
        for (auto& [t, stack] : lastStack[i])
            if (t == thread) return stack;
        return lastStack[i].emplace_back(thread, StackId{}).second;
    };
    // Level `all` also records every aten op the RecordFunction observer
    // sees (no user frame of their own): those legitimately differ per rank
    // (distribute_tensor scatters from rank 0 while the others allocate).
    // Compared are the ops that must match: DTensor-level ops and c10d
    // collectives, which carry their user frame.
    std::vector<bool> dtensorOnly;
    for (const RankStream& r : ranks) {
        auto level = r.reader->info().meta.find("level");
        dtensorOnly.push_back(level != r.reader->info().meta.end() && level->second == "all");
    }
    const int64_t page = std::clamp<int64_t>(
        kOpsPerRound / std::max<int64_t>(1, int64_t(ranks.size())), kMaxOpsPerChunk, kOpPage);
    // A page of one rank as the comparison reads it. The pages of a batch of
    // ranks are read side by side (each reader its own connection), then
    // compared in rank order, as if read one after the other.
    struct Compared {
        uint32_t thread;
        StringId name;
        int64_t step;
        StackId stack;
    };
    struct Page {
        std::vector<Compared> ops;
        int64_t count = 0;
    };
    const size_t batch =
        std::clamp<size_t>(size_t(kOpsReadTogether / page), 1,
                           std::max<size_t>(1, std::min(ranks.size(), kRanksReadTogether)));
    std::vector<Page> pages(batch);
    int64_t read = 0;
    for (bool more = true; more;) {
        more = false;
        for (size_t first = 0; first < ranks.size(); first += batch) {
            const size_t n = std::min(batch, ranks.size() - first);
            forEachInParallel(n, [&](size_t k) {
                const size_t i = first + k;
                Page& p = pages[k];
                p.ops.clear();
                p.count = 0;
                if (done[i]) return;
                const RecordingReach* reach = ranks[i].reach;
                last[i] = ranks[i].reader->scanOps(last[i], page, [&](const OpRecord& op) {
                    ++p.count;
                    if (dtensorOnly[i] && !op.stack) return;  // an observer op
                    if (reach && !reach->includes(op.startNs, op.step)) return;
                    p.ops.push_back({op.thread, op.name, op.step, op.stack});
                });
            });
            for (size_t k = 0; k < n; ++k) {
                const size_t i = first + k;
                if (done[i]) continue;
                for (const Compared& op : pages[k].ops) {
                    auto it = comparers.find(op.thread);
                    if (it == comparers.end()) {
                        // once per thread: a loop over every rank per op made
                        // 1,024 ranks quadratic
                        it = comparers
                                 .emplace(op.thread,
                                          SequenceComparer(Divergence::Kind::Ops, op.thread, ids))
                                 .first;
                        for (const RankStream& r : ranks)
                            if (r.reach && r.reach->truncated) it->second.setTruncated(r.id);
                    }
                    StackId& lastSeen = lastStackOf(i, op.thread);
                    if (op.stack) lastSeen = op.stack;
                    it->second.push(ranks[i].id, {names.id(*ranks[i].reader, int(i), op.name),
                                                  op.step, lastSeen, !op.stack && lastSeen});
                }
                read += pages[k].count;
                if (pages[k].count < page)
                    done[i] = true;
                else
                    more = true;
            }
        }
        // After every page, so threads first seen late know who has ended.
        for (size_t i = 0; i < ranks.size(); ++i)
            if (done[i])
                for (auto& [thread, c] : comparers)
                    c.setEnded(ranks[i].id);
        size_t before = out.size();
        for (auto& [thread, c] : comparers)
            c.compare(describe, out, {}, entrySite);
        for (size_t k = before; k < out.size(); ++k) {  // "aten::mul.Tensor at train.py:14"
            Divergence& d = out[k];
            std::string_view how = d.siteIsNearest ? " near " : " at ";
            if (!d.actual.empty() && !d.site.file.empty())
                d.actual += std::string(how) + formatLocation(d.site);
            if (!d.expected.empty() && !d.expectedSite.file.empty())
                d.expected += std::string(how) + formatLocation(d.expectedSite);
        }
        if (progress) progress(read);
    }
    return read;
}

namespace {

// Kinds whose every rank sends as many bytes: a different size at the same
// place is a different collective (gloo aborts on it, NCCL hangs or reads
// garbage). Scatter, gather, all-to-all and point-to-point differ by rank.
bool sizesMustAgree(std::string_view kind) {
    for (std::string_view k :
         {"all_reduce", "all_reduce_coalesced", "broadcast", "all_gather", "all_gather_tensor",
          "all_gather_tensor_autograd", "all_gather_into_tensor", "reduce_scatter",
          "reduce_scatter_tensor", "reduce_scatter_tensor_autograd", "reduce", "barrier"})
        if (kind == k) return true;
    return false;
}

std::string humanBytes(int64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    if (bytes < (int64_t(1) << 20)) return fmt::format("{:.1f} KiB", double(bytes) / 1024);
    return fmt::format("{:.1f} MiB", double(bytes) / double(int64_t(1) << 20));
}

}  // namespace

int64_t compareCollectiveSequences(const std::vector<RankStream>& ranks,
                                   std::vector<Divergence>& out) {
    constexpr int64_t kPage = 4096;
    std::vector<int> ids;
    for (const RankStream& r : ranks)
        ids.push_back(r.id);
    SequenceComparer comparer(Divergence::Kind::Collectives, 0, ids);
    std::unordered_map<std::string, int64_t> valueIds;
    std::vector<std::string> texts;
    // per rank, the call site of each collective compared
    std::map<int, std::vector<SourceFrame>> siteOf;
    int64_t read = 0;
    for (const RankStream& r : ranks) {
        std::unordered_map<int64_t, SourceFrame> sites;  // by stack id
        auto site = [&](const CollectiveRecord& c) {
            StackId stack = c.stack;
            if (!stack && c.op) {  // recorded without its own: the op's call site
                std::vector<OpRecord> op = r.reader->opsAfter(OpSeq{c.op.value() - 1}, 1);
                if (!op.empty() && op.front().seq == c.op) stack = op.front().stack;
            }
            auto [it, fresh] = sites.try_emplace(stack.value());
            if (fresh && stack) {
                std::vector<SourceFrame> frames = resolveStack(*r.reader, stack);
                if (!frames.empty()) it->second = frames.front();
            }
            return it->second;
        };
        bool truncated = r.reach && r.reach->truncated;
        CollectiveSeq after{};
        for (bool more = true; more;) {
            std::vector<CollectiveRecord> page = r.reader->collectivesAfter(after, kPage);
            more = int64_t(page.size()) == kPage;
            for (const CollectiveRecord& c : page) {
                ++read;
                // a seq missing is a record lost: nothing after it is compared
                bool gap = c.seq.value() != after.value() + 1;
                after = c.seq;
                if (gap || (r.reach && !r.reach->includes(c.startNs, c.step))) {
                    truncated = true;
                    more = false;
                    break;
                }
                std::string kind = r.reader->string(c.kind);
                std::string text = fmt::format("{} on {}", kind, r.reader->string(c.group));
                // bytes may differ legitimately for some kinds: kind and group must not
                if (sizesMustAgree(kind)) text += ", " + humanBytes(c.bytes);
                auto [it, fresh] = valueIds.try_emplace(text, int64_t(texts.size()));
                if (fresh) texts.push_back(text);
                comparer.push(r.id, {it->second, c.step, {}, false});
                siteOf[r.id].push_back(site(c));
            }
        }
        comparer.setEnded(r.id);
        if (truncated) comparer.setTruncated(r.id);
    }
    auto at = [](const SourceFrame& site) {
        return site.file.empty() ? std::string() : " at " + formatLocation(site);
    };
    auto siteAt = [&](int rank, int64_t index) {
        const std::vector<SourceFrame>& sites = siteOf[rank];
        return index >= 0 && size_t(index) < sites.size() ? sites[size_t(index)] : SourceFrame{};
    };
    size_t first = out.size();
    comparer.compare([&](int64_t v) { return texts[size_t(v)]; }, out);
    for (size_t i = first; i < out.size(); ++i) {
        Divergence& d = out[i];
        d.site = siteAt(d.rank, d.index);
        auto kindAndGroup = [](const std::string& text) {
            return text.substr(0, text.rfind(", "));
        };
        d.sizeOnly = !d.actual.empty() && !d.expected.empty() &&
                     kindAndGroup(d.actual) == kindAndGroup(d.expected);
        if (!d.actual.empty()) d.actual += at(d.site);
        if (!d.expected.empty() && !d.others.empty())
            d.expected += at(siteAt(d.others.front(), d.index));
    }
    return read;
}

std::string_view toString(Divergence::Kind kind) {
    switch (kind) {
        case Divergence::Kind::Ops:
            return "ops";
        case Divergence::Kind::Incidents:
            return "incidents";
        case Divergence::Kind::Collectives:
            return "collectives";
    }
    return "ops";
}

}  // namespace meshscope
