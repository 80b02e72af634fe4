// render_report_html: the HTML page of `ktune report` (sections built from a tuning_db::Report,
// plots from svg_plot).
#include "tools/report_html.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tools/svg_plot.h"
#include "tools/whole_percents.h"
#include "tuner/model_tuning.h"
#include "tuning_db/record.h"

namespace ktune::tools {
namespace {

using tuning_db::Report;

constexpr const char* kStyle = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1120px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:0 0 6px;font-family:monospace;word-break:break-all}
.meta{color:#666}.card{border:1px solid #ddd;border-radius:6px;padding:12px;margin:12px 0}
.row{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}.wide{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}td.cfg{font-family:monospace;font-size:11px;text-align:left;max-width:420px;word-break:break-all}
.plot text{font-size:11px;fill:#444}.plot .grid{stroke:#eee}.plot .frame{fill:none;stroke:#999}
.plot .series{fill:none;stroke-width:2}.spark .series{fill:none;stroke-width:1.5}td.spark{padding:1px 8px}.task{font-family:monospace;font-size:10px;color:#666;max-width:380px;word-break:break-all}.bad{color:#b00}.good{color:#070}
)css";

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// GFLOP/s with one decimal, or three significant digits below 1 (pooling, small kernels).
std::string gflops(double v) { return fmt(v >= 1 || v == 0 ? "%.1f" : "%.3g", v); }

// Milliseconds with four significant digits (kernels of a few microseconds keep theirs).
std::string ms(double seconds) { return fmt("%.4g", seconds * 1e3); }
std::string opt_ms(const std::optional<double>& s) { return s ? ms(*s) : "-"; }

std::string td(const std::string& v, bool left = false) {
  return (left ? "<td class=\"l\">" : "<td>") + v + "</td>";
}

std::string errors_table(const std::map<std::string, int64_t>& errors) {
  if (errors.empty()) return "<p>No failed records.</p>";
  std::string out = "<table><tr><th class=\"l\">error kind</th><th>records</th></tr>";
  for (const auto& [kind, n] : errors)
    out += "<tr>" + td(html_escape(kind), true) + td(std::to_string(n)) + "</tr>";
  return out + "</table>";
}

std::string summary_section(const Report& r, const std::string& generated_at) {
  const auto& s = r.stats;
  std::string out = "<h1>ktune tuning report</h1><p class=\"meta\">log " + html_escape(r.log) +
                    " &middot; schema " + std::to_string(s.schema_version) +
                    " &middot; generated " + html_escape(generated_at) + "</p>";
  out +=
      "<table><tr><th>workloads</th><th>targets</th><th>records</th><th>ok</th><th>failed</"
      "th><th>emulated</th><th>re-timed</th><th>noisy</th>"
      "<th>cost models saved</th><th>tuning runs (one per workload tuned, one per "
      "model)</th></tr><tr>" +
      td(std::to_string(s.workloads)) + td(std::to_string(s.targets)) +
      td(std::to_string(s.records)) + td(std::to_string(s.ok_records)) +
      td(std::to_string(s.failed_records)) + td(std::to_string(s.emulated_records)) +
      td(std::to_string(s.retimed_records)) + td(std::to_string(s.noisy_records)) +
      td(r.records_only ? "-" : std::to_string(s.models)) +
      td(r.records_only ? "-" : std::to_string(s.runs)) + "</tr></table>";
  if (r.records_only)
    out +=
        "<p class=\"meta\">- : a server's log is exported as its records only, without its cost "
        "models and tuning runs (ktune report --db on the server's log has them)</p>";
  return out + "<h2>Errors by kind (whole log)</h2>" + errors_table(s.failures_by_kind);
}

// How a figure was timed: "re-timed" (a re-timing's median), "noisy" (its timings spread more than
// tuning_db::kNoisySpread), both or "".
std::string timing_note(bool retimed, bool noisy) {
  if (retimed && noisy) return "re-timed, noisy";
  if (retimed) return "re-timed";
  return noisy ? "noisy" : "";
}

std::string workload_card(const tuning_db::WorkloadReport& w) {
  std::string out = "<div class=\"card\"><h3>" + html_escape(w.workload_key) +
                    (w.emulated ? " (emulated)" : "") + "</h3>";
  out += "<p class=\"meta\">" + html_escape(w.target.target) + " &middot; LLVM " +
         html_escape(w.target.llvm_version) + " &middot; " + std::to_string(w.records) +
         " records, " + std::to_string(w.ok_records) + " ok &middot; best " + "<b class=\"best\">" +
         gflops(w.best_gflops) + " GFLOP/s</b>" +
         (w.best_cost > 0 ? " (" + ms(w.best_cost) + " ms)" : "") +
         (w.best_retimed ? " re-timed" : "") +
         (w.best_noisy ? " <b class=\"noisy\">NOISY</b>" : "") +
         (w.noisy_records > 0 ? " &middot; " + std::to_string(w.noisy_records) + " noisy" : "") +
         "</p>";
  LinePlot plot;
  plot.x_label = "trials";
  plot.y_label = "best GFLOP/s";
  for (const auto& c : w.curves) {
    PlotSeries s{c.tuner.empty() ? "(no tuner)" : c.tuner, {}, true};
    for (const auto& p : c.points)
      s.points.emplace_back(static_cast<double>(p.trial), p.best_gflops);
    plot.series.push_back(std::move(s));
  }
  out += "<div class=\"row\">" + render_svg(plot) +
         "<div><table><tr><th class=\"l\">tuner</th><th>trials</th>"
         "<th>best GFLOP/s</th></tr>";
  for (size_t i = 0; i < w.curves.size(); ++i)
    out += "<tr><td class=\"l\" style=\"color:" + series_colour(i) + "\">" +
           html_escape(w.curves[i].tuner.empty() ? "(no tuner)" : w.curves[i].tuner) + "</td>" +
           td(std::to_string(w.curves[i].trials)) + td(gflops(w.curves[i].best_gflops)) + "</tr>";
  out += "</table><br>" + errors_table(w.errors_by_kind) + "</div></div>";
  if (!w.top.empty()) {
    out +=
        "<table><tr><th>#</th><th>config</th><th>GFLOP/s</th><th>ms</th><th class=\"l\">tuner</th>"
        "<th class=\"l\">timing</th><th class=\"l\">knobs</th></tr>";
    for (size_t i = 0; i < w.top.size(); ++i) {
      const auto& t = w.top[i];
      out += "<tr>" + td(std::to_string(i + 1)) + td(std::to_string(t.config_index)) +
             td(gflops(t.gflops)) + td(ms(t.mean_cost)) + td(html_escape(t.tuner), true) +
             td(timing_note(t.retimed, t.noisy), true) + "<td class=\"cfg\">" +
             html_escape(t.config) + "</td></tr>";
    }
    out += "</table>";
  }
  return out + "</div>";
}

std::string correlation_section(const Report& r) {
  std::string out = "<h2>Cost model: rank correlation per plan</h2>";
  if (r.runs.empty()) return out + "<p>No run stored model quality (only the xgb tuner does).</p>";
  LinePlot plot;
  plot.x_label = "plan";
  plot.y_label = "rank correlation";
  plot.fixed_y = true;
  plot.y_min = -1;
  std::string table =
      "<table><tr><th>run</th><th class=\"l\">tuner</th><th class=\"l\">workload</th><th>plan</th>"
      "<th>measured</th><th>rank correlation</th></tr>";
  for (const auto& run : r.runs) {
    PlotSeries s{"run " + std::to_string(run.id) + " " + run.workload_key, {}, false};
    for (const auto& p : run.plans) {
      if (p.rank_correlation)
        s.points.emplace_back(static_cast<double>(p.plan), *p.rank_correlation);
      table += "<tr>" + td(std::to_string(run.id)) + td(html_escape(run.tuner), true) +
               td(html_escape(run.workload_key), true) + td(std::to_string(p.plan)) +
               td(std::to_string(p.records)) +
               td(p.rank_correlation ? fmt("%.3f", *p.rank_correlation) : "-") + "</tr>";
    }
    plot.series.push_back(std::move(s));
  }
  return out + "<div class=\"row\">" + render_svg(plot) + table + "</table></div>";
}

// A row's ONNX nodes: its first occurrence's, "+k more" (the task's key in a summary written
// before the layers were stored).
// An ONNX node name without the module names that its next part repeats: torch.onnx nests
// "/features/features.1/block/block.0/block.0.0/Conv", which reads "features.1/block.0.0/Conv".
std::string compact_node_name(const std::string& name) {
  std::vector<std::string> parts;
  for (size_t at = 0; at <= name.size();) {
    const size_t slash = std::min(name.find('/', at), name.size());
    if (slash > at) parts.push_back(name.substr(at, slash - at));
    at = slash + 1;
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    if (i + 1 == parts.size() || parts[i + 1].rfind(parts[i] + ".", 0) != 0)
      out += (out.empty() ? "" : "/") + parts[i];
  return out.empty() ? name : out;
}

// A bar's label: the first layer's anchor node, compacted, and how many layers more.
std::string bar_label(const tuning_db::LayerRow& l) {
  if (l.layers.empty()) return l.key;
  const std::string& first = l.layers.front();
  std::string label = compact_node_name(first.substr(0, first.find('+')));
  if (l.layers.size() > 1) label += " +" + std::to_string(l.layers.size() - 1);
  return label;
}

std::string nodes_label(const tuning_db::LayerRow& l) {
  return l.layers.empty() ? l.key : tuner::layers_label(l.layers);
}

// A layer's label as the CLI prints it: its nodes, and for an alternative the row it stands in
// for.
std::string layer_label(const tuning_db::ModelRunReport& m, size_t i) {
  const tuning_db::LayerRow& l = m.layers[i];
  if (!l.alternative_of.empty())
    for (size_t k = 0; k < m.layers.size(); ++k)
      if (m.layers[k].key == l.alternative_of)
        return nodes_label(l) + " (other algorithm for #" + std::to_string(k + 1) + ")";
  return nodes_label(l);
}

// Per layer, the row that runs in the model: its tuned and library times (ms) as bars, and the
// layer's untuned fallback as the summary counts it (its task's, when an alternative ships).
std::string layer_bars(const tuning_db::ModelRunReport& m) {
  BarChart chart;
  chart.series = {"tuned", "library", "fallback"};
  auto ms_of = [](const std::optional<double>& s) -> std::optional<double> {
    return s ? std::optional<double>(*s * 1e3) : std::nullopt;
  };
  bool noisy = false;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const tuning_db::LayerRow& l = m.layers[i];
    if (!l.runs_in_model) continue;
    std::optional<double> fallback = l.fallback_s;
    for (const auto& task : m.layers)
      if (!l.alternative_of.empty() && task.key == l.alternative_of) fallback = task.fallback_s;
    noisy = noisy || l.noisy;
    chart.groups.push_back(
        {bar_label(l),
         {ms_of(l.best_s), l.noisy ? std::nullopt : ms_of(l.library_s), ms_of(fallback)},
         nodes_label(l)});
  }
  // Short enough for the chart's width; the table says the rest.
  chart.x_label = std::string("ms per layer: tuned (what ships), library") +
                  (!m.libraries_note.empty() ? " (none: see libraries above)"
                   : noisy                   ? " (none: noisy race)"
                                             : "") +
                  ", fallback (untuned)";
  return render_bars(chart);
}

// The log's tuning curves of a task's workload on the model's target (real devices first): one
// series per tuner, best GFLOP/s against its trials; nullptr when the log holds none.
const tuning_db::WorkloadReport* workload_of(const std::vector<tuning_db::WorkloadReport>& all,
                                             const std::string& key, const std::string& target) {
  const tuning_db::WorkloadReport* found = nullptr;
  for (const auto& w : all)
    if (w.workload_key == key && w.target.target == target && (!found || found->emulated))
      found = &w;
  return found;
}

// A layer's tuning curve as a sparkline in its row, its figures in the title; "-" without records.
std::string curve_cell(const tuning_db::WorkloadReport* w, const std::string& layer) {
  if (!w || w->curves.empty()) return "<td class=\"spark\">-</td>";
  std::vector<PlotSeries> series;
  std::string title = layer + ": best GFLOP/s against trials:";
  for (const auto& c : w->curves) {
    PlotSeries s{c.tuner.empty() ? "(no tuner)" : c.tuner, {}, true};
    for (const auto& p : c.points)
      s.points.emplace_back(static_cast<double>(p.trial), p.best_gflops);
    title += " " + s.name + " " + gflops(c.best_gflops) + " after " + std::to_string(c.trials) +
             (&c == &w->curves.back() ? "" : ",");
    series.push_back(std::move(s));
  }
  return "<td class=\"spark\">" + render_sparkline(series, title) + "</td>";
}

// The model's card: led by the built model's measured latency (the figure a build ships), else
// the tasks' estimate; the tuned tasks against their fallbacks and the libraries; the bars; the
// table by layer with each task's tuning curve.
std::string model_section(const tuning_db::ModelRunReport& m,
                          const std::vector<tuning_db::WorkloadReport>& workloads) {
  std::string out = "<div class=\"card model\"><h3>model " + html_escape(m.model) +
                    "</h3><p class=\"meta\">" + html_escape(m.target) + " &middot; run " +
                    std::to_string(m.run_id) + " &middot; " + std::to_string(m.trials) +
                    " trials &middot; ";
  if (m.measured_s)
    out += "<b>built model " + opt_ms(m.measured_s) + " ms measured end to end</b>";
  else
    out += "estimated " + opt_ms(m.tuned_s) + " ms (sum of count x best; not built in this run)";
  if (m.tuned_s && m.fallback_s && *m.tuned_s > 0 && m.noisy_in_sums > 0)
    out += " &middot; no speed-up over the untuned fallbacks quoted: the timings of " +
           std::to_string(m.noisy_in_sums) + " row(s) behind the sums spread more than " +
           fmt("%.0f", 100 * tuning_db::kNoisySpread) + "%";
  else if (m.tuned_s && m.fallback_s && *m.tuned_s > 0)
    out += " &middot; tuned tasks " + fmt("%.2f", *m.fallback_s / *m.tuned_s) +
           "x faster than their untuned fallbacks (" + opt_ms(m.tuned_s) + " against " +
           opt_ms(m.fallback_s) + " ms)";
  if (m.library_s && m.tuned_s_where_library && *m.library_s > 0) {
    // A noisy race is left out of the sums: say on how many layers the ratio rests.
    size_t raced = 0, noisy = 0;
    for (const auto& l : m.layers) {
      raced += l.library_s ? 1 : 0;
      noisy += l.library_s && l.noisy ? 1 : 0;
    }
    out += " &middot; tuned/library " + fmt("%.2f", *m.tuned_s_where_library / *m.library_s) +
           " on the same operators" +
           (noisy > 0 ? " (" + std::to_string(raced - noisy) + " of " + std::to_string(raced) +
                            " races; the noisy ones left out)"
                      : "");
  }
  if (!m.libraries_note.empty()) out += " &middot; libraries " + html_escape(m.libraries_note);
  out += "</p>" + layer_bars(m);
  size_t untried = 0;
  for (const auto& l : m.layers) untried += l.trials == 0 ? 1 : 0;
  if (untried > 0)
    out += "<p class=\"bad untried\">" + std::to_string(untried) + " of " +
           std::to_string(m.layers.size()) +
           " tasks got no trial in this run: each runs what the log held, else its fallback</p>";
  // In a box of its own that scrolls: its twelve columns are wider than the page at 1200 pixels.
  out +=
      "<div class=\"wide\"><table><tr><th>#</th><th "
      "class=\"l\">layer</th><th>count</th><th>trials</th><th>tuning "
      "curve</th><th>best ms</th><th>fallback ms</th><th>library "
      "ms</th><th>tuned/library</th><th title=\"of the tuned tasks' estimate, on the rows that "
      "ship\">share</th><th class=\"l\">ships</th><th class=\"l\">library</th></tr>";
  // Whole percents adding up to 100, as the model table prints them.
  std::vector<std::optional<double>> fractions;
  for (const auto& l : m.layers) fractions.push_back(l.share);
  const std::vector<std::optional<int>> shares = whole_percents(fractions);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    std::string ratio = "-";
    // The race's ratio of medians; a summary without one, best over the library's time.
    std::optional<double> r = l.ratio;
    if (!r && !l.noisy && l.best_s && l.library_s && *l.library_s > 0) r = *l.best_s / *l.library_s;
    if (l.noisy) {
      ratio = "<span class=\"bad\">noisy</span>";
    } else if (r) {
      const double x = *r;
      ratio = std::string("<span class=\"") + (x <= 1 ? "good" : "bad") + "\">" + fmt("%.2f", x) +
              "</span>";
    }
    const std::string trials =
        l.trials == 0 ? "<span class=\"bad\">none</span>" : std::to_string(l.trials);
    // The layer, its task's workload key under it (a column of its own would not fit the page).
    out += "<tr class=\"layer\">" + td(std::to_string(i + 1)) + "<td class=\"l\">" +
           html_escape(layer_label(m, i)) + "<div class=\"task\">" +
           html_escape(l.tuned_as.empty() ? l.key : l.tuned_as) + "</div></td>" +
           td(std::to_string(l.count)) + td(trials) +
           curve_cell(workload_of(workloads, l.tuned_as.empty() ? l.key : l.tuned_as, m.target),
                      layer_label(m, i)) +
           td(opt_ms(l.best_s) + (l.best_noisy ? "~" : "")) +
           td(opt_ms(l.fallback_s) + (l.fallback_noisy ? "~" : "")) +
           // A noisy race is the tuned kernel's timing, as the CLI marks it: the ratio column
           // says so; the library's own figure keeps its spread.
           td(opt_ms(l.library_s) +
              (l.library_spread ? fmt(" &plusmn;%.0f%%", *l.library_spread * 100) : "")) +
           td(ratio) + td(shares[i] ? std::to_string(*shares[i]) + "%" : "-") +
           td(l.runs_in_model ? "yes" : "no", true) + td(html_escape(l.library), true) + "</tr>";
  }
  out += "</table></div>";
  // As the model table under tune-model marks them.
  if (std::any_of(m.layers.begin(), m.layers.end(),
                  [](const auto& l) { return l.best_noisy || l.fallback_noisy; }))
    out += "<p class=\"meta noisy-legend\">~: the timings behind that figure spread more than " +
           fmt("%.0f", 100 * tuning_db::kNoisySpread) +
           "% (best ms: the log's best record; fallback ms: the fallback's re-timing)</p>";
  // An alternative that ships has a fallback of its own; an untuned build runs the layer's first
  // algorithm's, which the chart and the untuned sum use.
  if (std::any_of(m.layers.begin(), m.layers.end(),
                  [](const auto& l) { return l.runs_in_model && !l.alternative_of.empty(); }))
    out +=
        "<p class=\"meta fallback-legend\">fallback ms: each row's own untuned config; where "
        "another algorithm ships (e.g. Winograd), the chart's fallback bar and the untuned sum "
        "take the layer's first algorithm's, which an untuned build runs</p>";
  for (const auto& u : m.untuned)
    out += "<p class=\"meta\">not a tuned task: " + html_escape(u) + "</p>";
  return out + "</div>";
}

// Per model, its estimated latency (and the built model's measured one) run after run.
std::string estimates_over_time(const std::vector<tuning_db::ModelRunReport>& runs) {
  std::map<std::string, std::vector<const tuning_db::ModelRunReport*>> by_model;
  for (const auto& m : runs) by_model[m.model].push_back(&m);
  std::string out = "<h2>Model estimates over time</h2><div class=\"row\">";
  for (const auto& [model, list] : by_model) {
    LinePlot plot;
    plot.x_label = "run of " + model;
    plot.y_label = "ms";
    PlotSeries estimated{"estimated", {}, false}, measured{"built model, measured", {}, false};
    for (size_t k = 0; k < list.size(); ++k) {
      if (list[k]->tuned_s) estimated.points.emplace_back(k + 1.0, *list[k]->tuned_s * 1e3);
      if (list[k]->measured_s) measured.points.emplace_back(k + 1.0, *list[k]->measured_s * 1e3);
    }
    plot.series = {estimated, measured};
    out += "<div class=\"estimates\">" + render_svg(plot) + "</div>";
  }
  return out + "</div>";
}

}  // namespace

std::string render_report_html(const Report& report, const std::string& generated_at) {
  std::string page =
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ktune report: " +
      html_escape(report.log) + "</title><style>" + kStyle + "</style></head><body>";
  page += summary_section(report, generated_at);
  if (!report.model_runs.empty()) {
    page += "<h2>Model runs</h2>";
    for (const auto& m : report.model_runs) page += model_section(m, report.workloads);
    page += estimates_over_time(report.model_runs);
  }
  page += "<h2>Workloads: best GFLOP/s against trials</h2>";
  if (report.workloads.empty()) page += "<p>The log holds no records.</p>";
  for (const auto& w : report.workloads) page += workload_card(w);
  page += correlation_section(report);
  return page + "</body></html>\n";
}

}  // namespace ktune::tools
