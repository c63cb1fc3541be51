#pragma once
// The HTML report's style sheet and scripts, inlined into every page (html_report.cpp): the page must open
// without a network, so nothing is fetched.
namespace npusim::sim::html_assets {

// Runs first, in <head>: records every script error into <pre id="js-errors"> (visible on the page, and what
// the headless-browser test looks for) and window.npusimErrors.
extern const char* const kErrorCapture;
extern const char* const kCss;
// Sortable tables (click a header; `#sort=KEY` or `#sort=KEY-asc` in the address sorts the layer table on
// load), the layer filter; sets body[data-ready="1"] when done.
extern const char* const kScript;

}  // namespace npusim::sim::html_assets
