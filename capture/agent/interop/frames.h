#pragma once

// Python frames of the code that issued an op. The "user frame" is the
// innermost frame outside torch, meshscope and the Python runtime (Keras
// frames count as user code: that is where model code calls ops). Code
// objects are classified once and cached, so a user frame costs a short walk
// and a hash lookup. Requires the GIL.

#include <Python.h>

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/agent/agent_memory.h"
#include "core/store/records.h"
#include "core/util/direct_mapped.h"

namespace meshscope {
class RankWriter;
}

namespace meshscope::capture {

// " at file:line" for evidence texts, or "" without a file.
inline std::string whereText(const std::string& file, int line) {
    return file.empty() ? std::string() : " at " + file + ":" + std::to_string(line);
}

struct UserFrame {
    StackId stack;  // one-frame stack (interned)
    std::string file;
    int line = 0;
    std::string module;    // __name__ of the frame's globals, for policy rules
    std::string function;  // the code's qualified name: "Attention.forward"
    // " at file:line" for evidence texts, or "" when no user frame was found.
    std::string where() const { return whereText(file, line); }
};

// Another thread's stack from its innermost user frame.
struct ThreadStack {
    StackId stack;
    std::string where;  // " at file:line" of that frame, or ""
};

class FrameCache {
  public:
    // Directory prefixes whose frames are never user frames; frames under
    // `own` (meshscope's package: its wrappers of Module.__call__, to_local()
    // and the collectives) are left out of short stacks too.
    void setInternalPrefixes(std::vector<std::string> prefixes, std::vector<std::string> own);
    void clear();

    // The innermost user frame; stack is invalid when there is none.
    UserFrame userFrame(RankWriter& writer, bool withModule = false);
    // Only its one-frame stack (what every recorded op carries).
    StackId userStack(RankWriter& writer);
    // " at file:line" of a one-frame stack userStack() returned, or "" when
    // it is not (or no longer) known. A scan: for incidents, never per op.
    std::string whereOf(StackId stack) const;
    // Up to `depth` frames starting at the innermost user frame.
    StackId shortStack(RankWriter& writer, int depth = 12);
    // Up to `depth` frames of the thread `ident` (threading.get_ident()),
    // starting at its innermost user frame: where a blocked thread waits.
    // For the watchdog, never per op.
    ThreadStack stackOfThread(unsigned long ident, RankWriter& writer, int depth = 12);
    // The user's name for `obj` at the innermost user frames (an incident's
    // plain operand): a local variable ("mask"), else an attribute, buffer
    // or parameter of that frame's `self` ("self.mask"); "" when none holds
    // it. Reads the frames' locals: for incidents, never per op.
    std::string heldAs(PyObject* obj, RankWriter& writer) { return holding(obj, writer).name; }
    // heldAs with where the name was found: the user frame (1: innermost)
    // and its file and line, where code using the name may go. `onlyDepth`
    // > 0 looks in that user frame alone.
    struct Holding {
        std::string name;
        int depth = 0;
        std::string file;
        int line = 0;
        bool global = false;  // a global of that frame's module
    };
    Holding holding(PyObject* obj, RankWriter& writer, int onlyDepth = 0);
    // "x.device_mesh" for a local DTensor (or DTensor parameter) `x` of the
    // user frame `depth` whose mesh is `mesh`; "" when none. For incidents.
    std::string meshVia(PyObject* mesh, RankWriter& writer, int depth);

  private:
    struct CodeInfo {
        PyObject* code = nullptr;  // strong reference
        bool internal = false;
        bool own = false;  // meshscope's own code: not shown in stacks
        StringId file, function;
        std::string fileText, functionText;  // functionText: the qualified name
    };
    CodeInfo& info(PyCodeObject* code, RankWriter& writer);
    // visit(frame, locals, depth, code, line) for the first user frames (or the
    // one at `onlyDepth` > 0) until it returns true.
    template <typename Visit>
    void eachUserFrame(RankWriter& writer, int onlyDepth, Visit&& visit);
    struct OneFrame {
        StackId stack;
        int line;
    };
    // Calls found(code info, its one-frame stack, the frame's globals or
    // null) for the innermost user frame, if there is one.
    template <typename Found>
    void visitUserFrame(RankWriter& writer, Found&& found);

  public:
    // Whether the innermost Python frame of this thread runs user code (not
    // torch's, not meshscope's): false with no frame. Requires the GIL.
    bool innermostIsUser(RankWriter& writer);

  private:
    // Innermost user frame as a new reference, or nullptr (public-API walk,
    // for Pythons other than 3.11).
    PyFrameObject* firstUserFrame(RankWriter& writer);

    std::vector<std::string> m_internal;
    std::vector<std::string> m_own;
    std::pmr::unordered_map<PyCodeObject*, CodeInfo> m_codes{agentMemory()};
    // Direct-mapped in front of m_codes: an op's frame walk reads each
    // frame's entry, one probe each instead of a hash-node walk. The codes
    // are the ones m_codes keeps alive; clear() empties it.
    DirectMapped<PyCodeObject, CodeInfo, 256> m_codeFront;
    struct FrameKey {
        const void* code;
        int position;  // instruction offset (fast path) or line
        bool operator==(const FrameKey&) const = default;
    };
    struct FrameKeyHash {
        size_t operator()(const FrameKey& k) const {
            return std::hash<const void*>{}(k.code) * 31 + size_t(k.position);
        }
    };
    std::pmr::unordered_map<FrameKey, OneFrame, FrameKeyHash> m_oneFrame{
        agentMemory()};  // one-frame stacks

    // Consecutive ops mostly come from the same few frames (an optimizer's
    // loop, autograd's backward): the internal code objects met last and the
    // last user frame are checked before the hash lookups. Both hold codes
    // that m_codes keeps alive; clear() empties them.
    static constexpr size_t kRecentInternal = 8;
    std::array<const PyCodeObject*, kRecentInternal> m_recentInternal{};
    size_t m_recentNext = 0;
    bool recentlyInternal(const PyCodeObject* code) const;
    void rememberInternal(const PyCodeObject* code);
    struct LastUser {
        const PyCodeObject* code = nullptr;
        int lasti = -1;
        const CodeInfo* info = nullptr;
        OneFrame one;
    } m_lastUser;
};

}  // namespace meshscope::capture
