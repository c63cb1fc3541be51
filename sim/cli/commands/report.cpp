// npusim report: a saved report as an HTML page.
#include <string>

#include "sim/cli/commands/commands.h"
#include "sim/cli/files.h"
#include "sim/report/html_report.h"
#include "sim/report/report_file.h"

namespace npusim::sim::cli {

namespace po = boost::program_options;

int cmd_report(Context& ctx, const Command& cmd) {
  std::string input, html;
  po::options_description d("Options");
  d.add_options()("input", po::value(&input)->value_name("REPORT.json"), "a report (npusim run --report)")(
      "html", po::value(&html)->value_name("FILE.html"), "write it as one self-contained HTML page");
  po::positional_options_description pos;
  pos.add("input", 1);
  if (!parse(ctx, cmd, d, pos)) return kExitOk;
  if (input.empty()) throw UsageError("report needs a report file, REPORT.json (see 'npusim report --help')");
  if (html.empty())
    throw UsageError("report needs --html FILE.html, the page to write (see 'npusim report --help')");
  try {
    write_output(html, html_report(read_report_text(input), input));
  } catch (const ReportReadError& e) {
    throw InputError(e.what());
  }
  return kExitOk;
}

}  // namespace npusim::sim::cli
