// The CSV report: one row per incident with its kind, for a spreadsheet
// (cells that would run as formulas are quoted).

#include <ostream>

#include "core/report/report.h"
#include "core/report/report_text.h"
#include "core/util/terminal_text.h"
#include "core/util/utf8.h"

namespace meshscope {
namespace {

using namespace report_text;

// RFC 4180 field; cells a spreadsheet would run as a formula get a quote
// prefix (recorded strings are untrusted).
std::string csv(std::string_view text) {
    std::string cell = terminalSafe(text, /*keepLines=*/true);  // no raw control bytes
    if (!cell.empty() && std::string_view("=+-@\t\r").find(cell[0]) != std::string_view::npos)
        cell.insert(cell.begin(), '\'');
    if (cell.find_first_of(",\"\n\r") == std::string::npos) return cell;
    std::string out = "\"";
    for (char c : cell)
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

}  // namespace

void writeCsvReport(const RunAnalysis& a, std::ostream& out) {
    out << "rank,seq,step,time_ns,thread,group,kind,op,origin,action,outcome,verdict,file,line,"
           "function,evidence,fingerprint\r\n";
    for (const IncidentRef& r : a.incidents) {
        const IncidentGroup& g = a.groups[size_t(r.group)];
        // Only a mixed tensor has an origin class.
        std::string origin = r.kind == IncidentKind::MixedTensor ? originText(g.origin) : "";
        out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", r.rank,
                           r.seq.value(), r.step, r.timeNs, r.thread, g.id, toString(r.kind),
                           csv(g.op), origin, toString(r.action), toString(r.outcome),
                           toString(r.verdict), csv(g.site.file), g.site.line, csv(g.site.function),
                           csv(a.evidenceTexts[r.evidence]), fingerprintText(r.fingerprint));
    }
}

}  // namespace meshscope
