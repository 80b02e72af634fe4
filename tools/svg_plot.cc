// render_svg: line charts as inline SVG for `ktune report` (a page that needs no script and no file
// beside it).
#include "tools/svg_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace ktune::tools {
namespace {

constexpr double kLeft = 72, kRight = 12, kTop = 12, kBottom = 40;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A tick label: as few digits as the step needs.
std::string tick_label(double v, double step) {
  char buf[32];
  const int digits = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step))));
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A 1-2-5 step that cuts [lo, hi] into about four parts.
double nice_step(double lo, double hi) {
  const double raw = (hi - lo) / 4;
  if (!(raw > 0)) return 1;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

}  // namespace

std::string series_colour(size_t i) {
  static constexpr std::array<const char*, 8> kPalette = {
      "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return kPalette[i % kPalette.size()];
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string render_svg(const LinePlot& p) {
  double x_max = 1, y_lo = 0, y_hi = 0;
  bool any = false;
  for (const auto& s : p.series)
    for (const auto& [x, y] : s.points) {
      x_max = std::max(x_max, x);
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
      any = true;
    }
  if (p.fixed_y) {
    y_lo = p.y_min;
    y_hi = p.y_max;
  } else {
    y_hi = y_hi > 0 ? y_hi * 1.08 : 1;
  }
  const double y_step = nice_step(y_lo, y_hi);
  if (!p.fixed_y) y_hi = std::ceil(y_hi / y_step) * y_step;
  const double x_step = std::max(1.0, std::round(nice_step(0, x_max)));
  x_max = std::ceil(x_max / x_step) * x_step;

  const double w = p.width - kLeft - kRight, h = p.height - kTop - kBottom;
  auto sx = [&](double x) { return kLeft + w * x / x_max; };
  auto sy = [&](double y) { return kTop + h * (1 - (y - y_lo) / (y_hi - y_lo)); };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(p.width) +
                    "\" height=\"" + num(p.height) + "\" viewBox=\"0 0 " + num(p.width) + " " +
                    num(p.height) + "\" class=\"plot\">";
  // Grid and tick labels.
  for (double y = y_lo; y <= y_hi + y_step / 2; y += y_step) {
    svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + w) + "\" y1=\"" + num(sy(y)) +
           "\" y2=\"" + num(sy(y)) + "\" class=\"grid\"/>";
    svg += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(sy(y) + 4) + "\" text-anchor=\"end\">" +
           tick_label(y, y_step) + "</text>";
  }
  for (double x = 0; x <= x_max + x_step / 2; x += x_step)
    svg += "<text x=\"" + num(sx(x)) + "\" y=\"" + num(kTop + h + 16) +
           "\" text-anchor=\"middle\">" + tick_label(x, x_step) + "</text>";
  svg += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(w) +
         "\" height=\"" + num(h) + "\" class=\"frame\"/>";
  svg += "<text x=\"" + num(kLeft + w / 2) + "\" y=\"" + num(p.height - 6) +
         "\" text-anchor=\"middle\">" + html_escape(p.x_label) + "</text>";
  svg += "<text transform=\"translate(14 " + num(kTop + h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + html_escape(p.y_label) + "</text>";
  if (!any)
    svg += "<text x=\"" + num(kLeft + w / 2) + "\" y=\"" + num(kTop + h / 2) +
           "\" text-anchor=\"middle\">no data</text>";

  for (size_t i = 0; i < p.series.size(); ++i) {
    const auto& s = p.series[i];
    if (s.points.empty()) continue;
    const std::string colour = series_colour(i);
    std::string d;
    for (size_t k = 0; k < s.points.size(); ++k) {
      const auto [x, y] = s.points[k];
      if (k == 0) {
        d += "M" + num(sx(x)) + " " + num(sy(y));
      } else {
        if (s.steps) {
          d += " H" + num(sx(x)) + " V" + num(sy(y));
        } else {
          d += " L" + num(sx(x)) + " " + num(sy(y));
        }
      }
    }
    if (s.points.size() == 1) d += " h2";  // one point still draws a visible mark
    svg += "<path d=\"" + d + "\" stroke=\"" + colour + "\" class=\"series\"><title>" +
           html_escape(s.name) + "</title></path>";
    for (const auto& [x, y] : s.points)
      svg += "<circle cx=\"" + num(sx(x)) + "\" cy=\"" + num(sy(y)) + "\" r=\"2.5\" fill=\"" +
             colour + "\"/>";
  }
  // Legend, top left inside the frame.
  for (size_t i = 0; i < p.series.size(); ++i) {
    const double y = kTop + 14 + 16 * static_cast<double>(i);
    svg += "<rect x=\"" + num(kLeft + 8) + "\" y=\"" + num(y - 8) +
           "\" width=\"12\" height=\"4\" fill=\"" + series_colour(i) + "\"/><text x=\"" +
           num(kLeft + 26) + "\" y=\"" + num(y - 2) + "\">" + html_escape(p.series[i].name) +
           "</text>";
  }
  return svg + "</svg>";
}

std::string render_bars(const BarChart& c) {
  constexpr double kLabelWidth = 220, kBar = 9, kGap = 8, kLegend = 22;
  double x_max = 0;
  for (const auto& g : c.groups)
    for (const auto& v : g.values)
      if (v && std::isfinite(*v)) x_max = std::max(x_max, *v);
  const double x_step = nice_step(0, x_max > 0 ? x_max * 1.05 : 1);
  x_max = std::max(x_step, std::ceil((x_max > 0 ? x_max * 1.05 : 1) / x_step) * x_step);
  const double group_h = kBar * static_cast<double>(c.series.size()) + kGap;
  const double plot_h = group_h * static_cast<double>(c.groups.size());
  const double height = kLegend + plot_h + kBottom;
  const double w = c.width - kLabelWidth - 3 * kRight;  // room for the last tick's label
  auto sx = [&](double x) { return kLabelWidth + w * x / x_max; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(c.width) +
                    "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(c.width) + " " +
                    num(height) + "\" class=\"plot bars\">";
  for (double x = 0; x <= x_max + x_step / 2; x += x_step) {
    svg += "<line x1=\"" + num(sx(x)) + "\" x2=\"" + num(sx(x)) + "\" y1=\"" + num(kLegend) +
           "\" y2=\"" + num(kLegend + plot_h) + "\" class=\"grid\"/>";
    svg += "<text x=\"" + num(sx(x)) + "\" y=\"" + num(kLegend + plot_h + 14) +
           "\" text-anchor=\"middle\">" + tick_label(x, x_step) + "</text>";
  }
  svg += "<text x=\"" + num(kLabelWidth + w / 2) + "\" y=\"" + num(height - 8) +
         "\" text-anchor=\"middle\">" + html_escape(c.x_label) + "</text>";
  for (size_t i = 0; i < c.series.size(); ++i) {
    const double x = kLabelWidth + 110 * static_cast<double>(i);
    svg += "<rect x=\"" + num(x) + "\" y=\"6\" width=\"12\" height=\"8\" fill=\"" +
           series_colour(i) + "\"/><text x=\"" + num(x + 16) + "\" y=\"14\">" +
           html_escape(c.series[i]) + "</text>";
  }
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const double top = kLegend + group_h * static_cast<double>(g);
    const std::string& label = c.groups[g].label;
    const std::string& title = c.groups[g].title.empty() ? label : c.groups[g].title;
    // 30 characters fit the label column at the page's 11px; names differ at their ends (a
    // layer's index near the front, its operator at the back), so the middle gives way.
    const std::string shown =
        label.size() > 30 ? label.substr(0, 12) + "..." + label.substr(label.size() - 15) : label;
    svg += "<text x=\"" + num(kLabelWidth - 6) + "\" y=\"" + num(top + group_h / 2 + 2) +
           "\" text-anchor=\"end\" class=\"label\"><title>" + html_escape(title) + "</title>" +
           html_escape(shown) + "</text>";
    for (size_t i = 0; i < c.groups[g].values.size() && i < c.series.size(); ++i) {
      const auto& v = c.groups[g].values[i];
      if (!v || !std::isfinite(*v)) continue;
      char figure[48];
      std::snprintf(figure, sizeof figure, "%.4g", *v);
      svg += "<rect class=\"bar\" x=\"" + num(kLabelWidth) + "\" y=\"" +
             num(top + kBar * static_cast<double>(i)) + "\" width=\"" +
             num(std::max(1.0, sx(*v) - kLabelWidth)) + "\" height=\"" + num(kBar - 1) +
             "\" fill=\"" + series_colour(i) + "\"><title>" + html_escape(label) + ": " +
             html_escape(c.series[i]) + " " + figure + "</title></rect>";
    }
  }
  return svg + "</svg>";
}

std::string render_sparkline(const std::vector<PlotSeries>& series, const std::string& title,
                             double width, double height) {
  constexpr double kPad = 2;
  // y spans the figures themselves, not from 0: a curve that climbs 10% shows its climb.
  double x_max = 0, y_min = INFINITY, y_max = 0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) +
                    "\" height=\"" + num(height) + "\" class=\"spark\"><title>" +
                    html_escape(title) + "</title>";
  if (!(x_max > 0) || !(y_max > 0)) return svg + "</svg>";
  auto sx = [&](double x) { return kPad + (width - 2 * kPad) * x / x_max; };
  auto sy = [&](double y) {
    return y_max > y_min ? height - kPad - (height - 2 * kPad) * (y - y_min) / (y_max - y_min)
                         : height / 2;
  };
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& points = series[i].points;
    if (points.empty()) continue;
    std::string d = "M" + num(sx(0)) + " " + num(sy(points.front().second));
    for (const auto& [x, y] : points) d += " H" + num(sx(x)) + " V" + num(sy(y));
    d += " H" + num(sx(x_max));  // the best holds to the last trial of any series
    svg += "<path d=\"" + d + "\" stroke=\"" + series_colour(i) + "\" class=\"series\"/>";
  }
  return svg + "</svg>";
}

}  // namespace ktune::tools
