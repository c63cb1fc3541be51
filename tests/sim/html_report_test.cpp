// The HTML report writer (sim/report/html_report): every string from the report escaped, the sections the
// report has (and only those), one table row per layer, and reports that are not reports refused with one
// sentence.
#include "sim/report/html_report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "sim/report/report_file.h"

namespace npusim::sim {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// A report as npusim writes it, cut down to what the page reads; `layer_extra` and `top_extra` are JSON
// members added to every layer and to the top level.
std::string report(int layers, const std::string& layer_extra = "", const std::string& top_extra = "") {
  std::string o = fmt::format(
      "{{\"total_cycles\": {}, \"frequency_mhz\": 1000, \"latency_ms\": 0.1, \"macs\": 4000000, "
      "\"array_utilization\": 0.25, \"precision\": {{\"plan\": \"int8\", \"layers\": {{\"int8\": {}}}, "
      "\"peak_macs_per_cycle\": 1024, \"utilization\": 0.25}}, \"bound_cycles\": 500, \"efficiency\": 0.5, "
      "\"array\": {{\"rows\": 32, \"cols\": 32, \"dataflow\": \"ws\", \"macs_per_pe_per_cycle\": {{\"int8\": "
      "1, "
      "\"fp16\": 0.5}}}}, \"breakdown\": {{\"compute\": 600, \"memory\": 300, \"scheduling\": 100, \"host\": "
      "0}}, "
      "\"dram\": {{\"model\": \"lpddr4_4266\", \"bytes_read\": 100000, \"bytes_written\": 50000, "
      "\"avg_bandwidth_gbps\": 1.5, \"peak_bandwidth_gbps\": 17}}, "
      "\"units\": {{\"matrix\": {{\"instructions\": 10, \"busy\": 600, \"idle\": 400, \"stalls\": "
      "{{\"memory\": 0, "
      "\"bank_conflict\": 0, \"scheduling\": 0, \"queue_full\": 0, \"host\": 0}}}}}},\n\"layers\": [",
      1000 * layers, layers);
  for (int i = 0; i < layers; ++i) {
    o += fmt::format(
        "{}\n{{\"name\": \"/blocks.{}/conv<b>&\\\"q'\", \"display_name\": \"conv<b>#{}\", \"op\": \"Conv\", "
        "\"placement\": \"npu\", \"precision\": \"int8\", \"start_cycle\": {}, \"end_cycle\": {}, "
        "\"cycles\": 1000, "
        "\"macs\": 4000, \"dram_bytes_read\": 100, \"dram_bytes_written\": 50, \"bound\": \"compute\", "
        "\"breakdown\": {{\"compute\": 600, \"memory\": 300, \"scheduling\": 100, \"host\": 0}}, "
        "\"bound_cycles\": 500, \"compiled_bound_cycles\": 500, "
        "\"efficiency\": 0.5, \"mapping\": {{\"placement\": \"matrix\"}}{}}}",
        i ? "," : "", i, i, 1000 * i, 1000 * (i + 1), layer_extra);
  }
  o += "\n],\n\"ops\": [], " + top_extra +
       "\"run\": {\"command\": \"npusim run m<1>.onnx\", \"version\": \"0.1.0 (test)\", \"model\": "
       "\"m<1>&.onnx\", "
       "\"model_sha256\": \"\", \"config\": \"\", \"sets\": [], \"parameters\": {}}, "
       "\"sim\": {\"wall_seconds\": 0.1, \"instructions\": 10, \"functional\": false}}\n";
  return o;
}

const std::string kEnergy =
    "\"energy\": {\"total_mj\": 1.5, \"by_component_mj\": {\"mac\": 0.5, \"sram\": 0.3, \"dram\": 0.4, "
    "\"vector\": "
    "0.1, \"dma\": 0.05, \"host_link\": 0.05, \"static\": 0.1}, \"average_power_w\": 2.5, \"peak_power_w\": "
    "4, "
    "\"tops_per_w\": 3.2}, \"area\": {\"total_mm2\": 12.5, \"by_unit_mm2\": {\"array\": 4, \"sram_input\": "
    "3, "
    "\"vector\": 1}}, ";
const std::string kLayerEnergy =
    ", \"energy\": {\"total_mj\": 0.5, \"by_component_mj\": {\"mac\": 0.2, \"sram\": 0.1, \"dram\": 0.2}}";
const std::string kAccuracy =
    "\"accuracy\": {\"precision\": \"int8\", \"output_sqnr_db\": 15.2, \"output_cosine\": 0.98, "
    "\"output_max_abs_error\": 0.3, \"output_nonfinite\": 0, \"first_bad_layer\": null, "
    "\"bad_layer_sqnr_db\": 10, "
    "\"calibration\": {\"method\": \"entropy\", \"inputs\": 1, \"synthetic\": true, \"source\": "
    "\"synthetic\"}, "
    "\"evaluation_inputs\": 4, \"warnings\": [\"weights <w> & co\"], \"layers\": [{\"name\": \"a<x>\", "
    "\"op\": \"Conv\", "
    "\"precision\": \"int8\", \"sqnr_db\": 20, \"cosine\": 0.99, \"own_sqnr_db\": 31.25, \"max_abs_error\": "
    "0.1, "
    "\"nonfinite\": 0, "
    "\"overflow\": 0, \"underflow\": 0, \"saturated\": 3}], \"weight_outliers\": []}, ";

TEST(HtmlReport, EscapesEveryStringFromTheReport) {
  const std::string page = html_report(report(3, "", kAccuracy), "r.json");
  // The only markup is the page's own: two scripts (error capture and the table script), no <b> from a name.
  EXPECT_EQ(count(page, "<script"), 2u);
  EXPECT_EQ(count(page, "<b>"), 0u);
  EXPECT_NE(page.find("/blocks.1/conv&lt;b&gt;&amp;&quot;q&#39;"), std::string::npos);
  // The short name the page shows is traces::display_names' of the full names.
  EXPECT_NE(page.find("title=\"/blocks.2/conv&lt;b&gt;&amp;&quot;q&#39;\">blocks.2</td>"), std::string::npos);
  EXPECT_NE(page.find("<title>npusim: m&lt;1&gt;&amp;.onnx</title>"), std::string::npos);
  EXPECT_NE(page.find("weights &lt;w&gt; &amp; co"), std::string::npos);
  EXPECT_NE(page.find("a&lt;x&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<x>"), std::string::npos);
  // JSON escapes arrive decoded; control characters become U+FFFD.
  std::string r = report(1);
  const std::string name = "/blocks.0/conv<b>&\\\"q'";  // as the JSON spells it
  r.replace(r.find(name), name.size(), "caf\\u00e9\\u0001");
  const std::string decoded = html_report(r, "r.json");
  EXPECT_NE(decoded.find("caf\u00e9\uFFFD</td>"), std::string::npos);
}

// The task metrics a user judges by: cards for each task, and for ocr-rec the strings read differently,
// escaped like every other string.
TEST(HtmlReport, ShowsTheTaskMetricsAndTheStringsReadDifferently) {
  std::string acc = kAccuracy;
  const std::string rec =
      "\"evaluation_source\": \"held<out>\", \"task\": {\"task\": \"ocr-rec\", \"inputs\": 20, "
      "\"strings_equal\": 19, \"string_agreement\": 0.95, \"string_agreement_trimmed\": 1, "
      "\"reference_chars\": 400, \"char_edits\": 2, \"char_error_rate\": 0.005, \"mismatches\": "
      "[{\"fp32\": \"pay<ment>\", \"quantized\": \"paynent\", \"steps_differing\": 3, "
      "\"fp32_margin_min\": 0.125, \"fp32_margin_max\": 4}]}, ";
  acc.insert(acc.find("\"evaluation_inputs\""), rec);
  const std::string page = html_report(report(2, "", acc), "r.json");
  for (const char* present :
       {"same string", "95.0%", "19 of 20 (100.0% ignoring leading/trailing spaces)", "character error rate",
        "0.5%", "2 edits over fp32&#39;s 400 characters", "4 evaluation inputs: held&lt;out&gt;",
        "id=\"mismatch-table\"", "pay&lt;ment&gt;", ">paynent<", ">0.125<"})
    EXPECT_NE(page.find(present), std::string::npos) << present;
  EXPECT_EQ(page.find("<ment>"), std::string::npos);
  // Classification and detection: their own cards, no string table.
  std::string cls = kAccuracy;
  cls.insert(cls.find("\"evaluation_inputs\""),
             "\"task\": {\"task\": \"classify\", \"inputs\": 8, \"top1_agreement\": 0.875, "
             "\"top5_agreement\": 1}, ");
  const std::string cpage = html_report(report(1, "", cls), "r.json");
  for (const char* present :
       {"top-1 agreement", "87.5%", "<span class=\"opt\">--task</span> classify: 8 inputs", "top-5 agreement",
        "4 evaluation inputs (synthetic)"})
    EXPECT_NE(cpage.find(present), std::string::npos) << present;
  EXPECT_EQ(cpage.find("mismatch-table"), std::string::npos);
  std::string det = kAccuracy;
  det.insert(det.find("\"evaluation_inputs\""),
             "\"task\": {\"task\": \"ocr-det\", \"inputs\": 8, \"f1\": 0.98312, \"iou\": 0.9667}, ");
  const std::string dpage = html_report(report(1, "", det), "r.json");
  for (const char* present : {"text-map F1", "0.9831", "IoU 0.9667"})
    EXPECT_NE(dpage.find(present), std::string::npos) << present;
}

// --labels (issue 40, item 12): accuracy against the ground truth beside the agreement with fp32.
TEST(HtmlReport, ShowsTop1AndTop5AgainstLabels) {
  std::string cls = kAccuracy;
  cls.insert(cls.find("\"evaluation_inputs\""),
             "\"task\": {\"task\": \"classify\", \"inputs\": 8, \"top1_agreement\": 0.875, "
             "\"top5_agreement\": 1, \"labels\": {\"inputs\": 8, \"fp32_top1\": 0.75, \"fp32_top5\": 1, "
             "\"quantized_top1\": 0.625, \"quantized_top5\": 0.875}}, ");
  const std::string page = html_report(report(1, "", cls), "r.json");
  for (const char* present :
       {"top-1 against labels</div><div class=\"v\">62.5%</div><div class=\"s\">quantized; fp32 75.0% (8 "
        "labelled inputs)",
        "top-5 against labels</div><div class=\"v\">87.5%</div><div class=\"s\">quantized; fp32 100.0%"})
    EXPECT_NE(page.find(present), std::string::npos) << present;
  std::string plain = kAccuracy;
  plain.insert(plain.find("\"evaluation_inputs\""),
               "\"task\": {\"task\": \"classify\", \"inputs\": 8, \"top1_agreement\": 0.875, "
               "\"top5_agreement\": 1}, ");
  EXPECT_EQ(html_report(report(1, "", plain), "r.json").find("against labels"), std::string::npos);
}

TEST(HtmlReport, IsSelfContained) {
  const std::string page = html_report(report(2, kLayerEnergy, kEnergy + kAccuracy), "r.json");
  for (const char* external : {"http:", "https:", "src=", "@import", "url(http", "<link"}) {
    EXPECT_EQ(page.find(external), std::string::npos) << external;
  }
}

TEST(HtmlReport, HasTheCoreSectionsAndOneRowPerLayer) {
  const std::string page = html_report(report(7), "r.json");
  for (const char* id :
       {"id=\"summary\"", "id=\"layers\"", "id=\"timeline\"", "id=\"roofline\"", "id=\"layer-table\""}) {
    EXPECT_NE(page.find(id), std::string::npos) << id;
  }
  EXPECT_EQ(count(page, "<tr id=\"L"), 7u);
  // Seven layers on the timeline and seven points on the roofline, each linking to its row.
  EXPECT_EQ(count(page, "<a href=\"#L"), 14u);
  EXPECT_NE(page.find("int8 roof"), std::string::npos);
  EXPECT_NE(page.find("data-key=\"efficiency\""), std::string::npos);
}

// What explains a layer, in its row: the unit it ran on, its shapes, window, fusion saved, useful-MAC
// utilization (4000 MACs on a 32x32 int8 array over 1000 cycles: 0.39%) and mapping in short.
TEST(HtmlReport, LayerTableShowsUnitShapesWindowFusionSavedMacUtilizationAndMapping) {
  const std::string page = html_report(
      report(1,
             ", \"compute_cycles\": 800, \"input_shape\": \"1x8x16x16\", \"output_shape\": \"1x16x8x8\", "
             "\"kernel\": \"3x3\", \"stride\": \"2x2\", \"groups\": 1"),
      "r.json");
  for (const char* key :
       {"unit", "shapes", "kernel", "efficiency", "fusion_saved", "mac_utilization", "mapping"})
    EXPECT_NE(page.find(fmt::format("data-key=\"{}\"", key)), std::string::npos) << key;
  EXPECT_EQ(page.find("data-key=\"placement\""), std::string::npos);
  // Long texts are cut to their column (the whole text in the title); a small share keeps two digits.
  for (const char* cell :
       {"<td>array</td>",
        "<td class=\"cut\" title=\"1x8x16x16 \u2192 1x16x8x8\">1x8x16x16 \u2192 1x16x8x8</td>",
        "<td class=\"cut\" title=\"3x3 s2x2 g1\">3x3 s2x2 g1</td>", ">0.39%</td>",
        "<td class=\"cut\" title=\"matrix\">matrix</td>"})
    EXPECT_NE(page.find(cell), std::string::npos) << cell;
}

// Where the precision came from (run.precision_source) under the precision card: a configuration's default
// as it is, an option as "chosen by".
TEST(HtmlReport, ThePrecisionCardSaysWhereThePrecisionCameFrom) {
  std::string r = report(1);
  const std::string params = "\"parameters\": {}";
  r.replace(r.find(params), params.size(),
            params +
                ", \"precision_source\": \"tpu-v1's default precision (lowering.default_precision: auto, "
                "and the array multiplies int8 only; calibrated; --precision to choose another)\"");
  EXPECT_NE(
      html_report(r, "r.json")
          .find("<div class=\"v\">int8</div><div class=\"s\">peak 1,024 MACs/cycle; tpu-v1&#39;s default "
                "precision (lowering.default_precision: auto, and the array multiplies int8 only; "
                "calibrated; <span class=\"opt\">--precision</span> to choose another)</div>"),
      std::string::npos);
  r = report(1);
  r.replace(r.find(params), params.size(), params + ", \"precision_source\": \"--precision int8\"");
  EXPECT_NE(html_report(r, "r.json")
                .find("peak 1,024 MACs/cycle; chosen by <span class=\"opt\">--precision</span> int8</div>"),
            std::string::npos);
}

TEST(HtmlReport, EnergyAndAccuracyOnlyWhenTheReportHasThem) {
  const std::string plain = html_report(report(2), "r.json");
  for (const char* absent :
       {"id=\"energy\"", "id=\"accuracy\"", "data-key=\"energy\"", "#energy", "#accuracy", "mJ"}) {
    EXPECT_EQ(plain.find(absent), std::string::npos) << absent;
  }
  const std::string full = html_report(report(2, kLayerEnergy, kEnergy + kAccuracy), "r.json");
  for (const char* present : {"id=\"energy\"", "id=\"accuracy\"", "data-key=\"energy\"", "1.5 mJ", "2.5 W",
                              "4 W", "3.2 TOPS/W", "host_link", "static", "12.5 mm\u00b2", "sram_input",
                              "15.20 dB", "id=\"accuracy-table\"", "mac 0.2 mJ", "own SQNR dB", ">31.25<"}) {
    EXPECT_NE(full.find(present), std::string::npos) << present;
  }
  // The layers' energies summed (2 x 0.5 mJ) next to the total.
  EXPECT_NE(full.find("summed over the 2 layers"), std::string::npos);
}

TEST(HtmlReport, OmitsWhatAReportWithoutTheCompilersViewLacks) {
  // `npusim exec`: no precision, bounds or efficiency.
  std::string r = report(2);
  for (const std::string& cut :
       {std::string(", \"precision\": \"int8\""), std::string(", \"bound_cycles\": 500"),
        std::string(", \"compiled_bound_cycles\": 500"), std::string(", \"efficiency\": 0.5")}) {
    for (size_t at = r.find(cut); at != std::string::npos; at = r.find(cut)) r.erase(at, cut.size());
  }
  const std::string page = html_report(r, "r.json");
  EXPECT_EQ(page.find("data-key=\"efficiency\""), std::string::npos);
  EXPECT_EQ(page.find("data-key=\"precision\""), std::string::npos);
  EXPECT_EQ(page.find("roofline efficiency"), std::string::npos);
  EXPECT_EQ(count(page, "<tr id=\"L"), 2u);
}

TEST(HtmlReport, RefusesWhatIsNotAReportWithOneSentence) {
  const std::string good = report(2);
  struct Case {
    std::string text, expect;
  };
  for (const Case& c :
       {Case{"", "r.json is empty"}, Case{"PK\x03\x04 binary", "is not JSON (it does not start with '{')"},
        Case{good.substr(0, good.size() / 2), "is not JSON (it breaks off at line"},
        Case{"{\"a\": [1, 2}\n\n{", "is not JSON (a syntax error at line 1, column 12)"},
        // What yaml-cpp alone would take: a trailing comma, a second value, YAML's words.
        Case{"{\"total_cycles\": 1,, \"layers\": []}", "a syntax error at line 1, column 20"},
        Case{"{\"total_cycles\": 1, \"layers\": []}\n{}", "a syntax error at line 2, column 1"},
        Case{"{\"total_cycles\": yes, \"layers\": []}", "a syntax error at line 1, column 18"},
        Case{"{\"total_cycles\": 1, \"layers\": [tru", "it breaks off at line 1"},
        Case{"{\"a\": 1}", "is not an npusim report"},
        Case{"{\"total_cycles\": 5, \"layers\": 3}", "is not an npusim report"}}) {
    try {
      html_report(c.text, "r.json");
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const ReportReadError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(c.expect), std::string::npos) << what << " / expected: " << c.expect;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(HtmlReport, EveryCutOrDamagedReportIsASentenceOrAPage) {
  // Every prefix of a report breaks off; a byte changed anywhere gives a page or one sentence, never
  // another exception.
  const std::string good = report(3, kLayerEnergy, kEnergy + kAccuracy);
  for (size_t n = 0; n + 1 < good.size(); ++n) {
    const std::string cut = good.substr(0, n);
    EXPECT_THROW(html_report(cut, "r.json"), ReportReadError) << n;
  }
  for (size_t at = 0; at < good.size(); at += 7) {
    for (char c : {'"', '}', ',', 'x', '\x01'}) {
      std::string bad = good;
      bad[at] = c;
      try {
        html_report(bad, "r.json");
      } catch (const ReportReadError&) {
      }
    }
  }
}

TEST(HtmlReport, AFigureOfTheWrongTypeIsOneSentenceAndASectionOfTheWrongShapeIsSkipped) {
  // The simulator's figures are read by type (sim::read_report): a hand-edited string where a number was
  // is refused, naming the file and the key.
  try {
    html_report("{\"total_cycles\": \"many\", \"frequency_mhz\": [1], \"layers\": []}", "r.json");
    ADD_FAILURE() << "accepted";
  } catch (const ReportReadError& e) {
    EXPECT_EQ(std::string(e.what()), "r.json: the report's 'total_cycles' is not what npusim writes there");
  }
  // The sections of the stages outside the simulator are shown as far as they have the expected shape.
  const std::string page = html_report(
      report(2, "", "\"accuracy\": {\"layers\": 5}, \"e2e\": [1], \"compile\": {\"fallbacks\": 3}, "),
      "r.json");
  EXPECT_EQ(count(page, "<tr id=\"L"), 2u);
  EXPECT_NE(page.find("id=\"accuracy\""), std::string::npos);
  EXPECT_EQ(page.find("id=\"e2e\""), std::string::npos);
  EXPECT_EQ(page.find("Host fallbacks"), std::string::npos);
}

}  // namespace
}  // namespace npusim::sim
