// Defines LinePlot, BarChart and sparklines: line and horizontal bar charts drawn as inline SVG
// text (axes, ticks, a legend), no script.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ktune::tools {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in order of x
  bool steps = false;                             // draw as a step curve (hold y until the next x)
};

struct LinePlot {
  std::string x_label, y_label;
  double width = 560, height = 260;
  // The y range: the data's (with 0 included) unless fixed here.
  bool fixed_y = false;
  double y_min = 0, y_max = 1;
  std::vector<PlotSeries> series;
};

// Horizontal bars: one group per label (a layer), one bar per series in each (tuned, library,
// fallback); a missing value draws no bar.
struct BarChart {
  std::string x_label;
  std::vector<std::string> series;  // names, in the order of each group's values
  struct Group {
    std::string label;  // drawn; past 30 characters its middle gives way to "..."
    std::vector<std::optional<double>> values;
    std::string title = "";  // what a pointer over the label shows ("" = the label)
  };
  std::vector<Group> groups;
  double width = 760;
};

// The chart as one <svg class="bars"> element: a <rect class="bar"> per value with its figure as
// a <title>, the group labels on the left, a legend on top.
std::string render_bars(const BarChart& chart);

// A tuning curve small enough for a table cell: every series a step path (best against trials) in
// its colour, no axes; `title` is what a pointer over it shows (the figures). Nothing drawn
// without points.
std::string render_sparkline(const std::vector<PlotSeries>& series, const std::string& title,
                             double width = 120, double height = 26);

// The colour of the i-th series (one palette for plots and legends).
std::string series_colour(size_t i);

// The plot as one <svg> element (every series a <path d="..."> with its points marked). A plot
// without points is an <svg> with its axes and a "no data" note.
std::string render_svg(const LinePlot& plot);

// `s` with &, <, >, " and ' escaped for HTML text and attributes.
std::string html_escape(const std::string& s);

}  // namespace ktune::tools
