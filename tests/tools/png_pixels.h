// Defines decode_png(): the pixels of an 8-bit RGB/RGBA, non-interlaced PNG (what headless
// Chromium's screenshots are), for tests that look at a rendered page.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace ktune::testing_png {

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // width * height * 3
  uint32_t at(uint32_t x, uint32_t y) const {
    const size_t i = (static_cast<size_t>(y) * width + x) * 3;
    return (uint32_t{rgb[i]} << 16) | (uint32_t{rgb[i + 1]} << 8) | rgb[i + 2];
  }
};

namespace detail {
inline uint32_t be32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | static_cast<uint8_t>(s[at + 3]);
}
inline uint8_t paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return static_cast<uint8_t>(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}
}  // namespace detail

// The image, or nullopt for anything that is not such a PNG (bad signature, chunk, inflate or
// filter).
inline std::optional<Image> decode_png(const std::string& file) {
  if (file.size() < 8 || file.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return std::nullopt;
  Image img;
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 12 <= file.size();) {
    const uint32_t n = detail::be32(file, at);
    const std::string type = file.substr(at + 4, 4);
    if (at + 12 + n > file.size()) return std::nullopt;
    if (type == "IHDR") {
      img.width = detail::be32(file, at + 8);
      img.height = detail::be32(file, at + 12);
      const int depth = file[at + 16], colour = file[at + 17], interlace = file[at + 20];
      if (depth != 8 || interlace != 0 || (colour != 2 && colour != 6)) return std::nullopt;
      channels = colour == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat += file.substr(at + 8, n);
    }
    at += 12 + n;
  }
  if (channels == 0 || img.width == 0 || img.height == 0) return std::nullopt;
  const size_t stride = static_cast<size_t>(img.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_size != raw.size())
    return std::nullopt;
  std::vector<uint8_t> prev(stride, 0), row(stride);
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t* in = &raw[y * (stride + 1)];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? row[i - channels] : 0, b = prev[i],
                c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      int pred = 0;
      switch (in[0]) {
        case 0:
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4:
          pred = detail::paeth(a, b, c);
          break;
        default:
          return std::nullopt;
      }
      row[i] = static_cast<uint8_t>(in[1 + i] + pred);
    }
    for (uint32_t x = 0; x < img.width; ++x)
      for (int k = 0; k < 3; ++k)
        img.rgb[(static_cast<size_t>(y) * img.width + x) * 3 + k] = row[x * channels + k];
    prev = row;
  }
  return img;
}

}  // namespace ktune::testing_png
