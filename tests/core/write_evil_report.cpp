// Writes a report of a run whose recorded strings are hostile (script tags,
// event handlers, quotes, invalid UTF-8) for tests/core/render_report.sh.

#include <fstream>
#include <iostream>

#include "core/report/html_report.h"
#include "tests/core/fixture_run.h"
#include "tests/core/test_support.h"

int main(int argc, char** argv) {
    using namespace meshscope;
    if (argc != 2) {
        std::cerr << "usage: write_evil_report OUT.html\n";
        return 2;
    }
    test::TempDir dir;
    test::FixtureIncident raised{"aten::x</script><img src=x onerror=alert(1)>",
                                 OriginClass::InputData,
                                 "/src/\"quoted' <svg onload=alert(2)>.py",
                                 41,
                                 0,
                                 Action::Observed,
                                 Outcome::Raised,
                                 std::nullopt,
                                 "evidence <img src=x onerror=alert(3)> \xff\xfe",
                                 "<b>label</b>",
                                 "<iframe src=x>"};
    test::FixtureIncident replicated{
        "aten::add.Tensor", OriginClass::CreatedInForward, "model.py", 7, 0,
        Action::Replicated, Outcome::Reconciled,           1};
    test::writeRank(dir.path(), 2, 0, 30, {raised, replicated});
    replicated.fingerprint = 2;
    test::writeRank(dir.path(), 2, 1, 30, {raised, replicated});
    RunReader run = RunReader::open(dir.path());
    std::ofstream out(argv[1]);
    writeHtmlReport(run, analyze(run), out);
    return out ? 0 : 1;
}
