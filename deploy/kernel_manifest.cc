// parse_manifest(): the kernels of `ktune build --manifest`, every malformed entry named by its
// position.
#include "deploy/kernel_manifest.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/error.h"

namespace ktune::deploy {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "manifest " + where + ": " + what);
}

// An argument value as the command line would spell it: numbers and strings only.
std::string arg_text(const json& v, const std::string& key, const std::string& where,
                     const std::string& label) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return v.dump();  // a float: the template says whether it takes one
  bad(where, label + ": argument " + key + " must be a number or a string, not " + v.dump());
}

std::vector<std::string> args_of(const json& args, const std::string& where,
                                 const std::string& label) {
  std::vector<std::string> out;
  if (args.is_object()) {
    for (const auto& [key, value] : args.items())
      out.push_back(key + "=" + arg_text(value, key, where, label));
  } else if (args.is_array()) {
    for (const auto& a : args) {
      if (!a.is_string() || a.get<std::string>().find('=') == std::string::npos)
        bad(where, label + ": args entries must be \"key=value\" strings, not " + a.dump());
      out.push_back(a.get<std::string>());
    }
  } else {
    bad(where, label + ": args must be an object or an array of \"key=value\" strings, not " +
                   args.dump());
  }
  return out;
}

}  // namespace

std::vector<KernelRequest> parse_manifest(const std::string& text, const std::string& where) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann's message carries the line and column; its "[json.exception...]" prefix does not
    // help.
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    bad(where, "not valid JSON: " + what);
  }
  if (!doc.is_array()) bad(where, std::string("must be ") + kManifestFormat);
  if (doc.empty()) bad(where, "lists no kernel");
  std::vector<KernelRequest> requests;
  for (size_t i = 0; i < doc.size(); ++i) {
    const json& e = doc[i];
    const std::string entry = "entry " + std::to_string(i);
    if (!e.is_object()) bad(where, entry + " is not an object: " + e.dump());
    if (!e.contains("name") || !e["name"].is_string())
      bad(where, entry + ": \"name\" (a string) is missing");
    KernelRequest r;
    r.name = e["name"].get<std::string>();
    r.label = "kernel '" + r.name + "' (" + entry + ")";
    for (const auto& [key, value] : e.items()) {
      if (key != "name" && key != "template" && key != "args" && key != "require_tuned")
        bad(where,
            r.label + ": unknown key \"" + key + "\" (known: name, template, args, require_tuned)");
    }
    if (!e.contains("template") || !e["template"].is_string())
      bad(where, r.label + ": \"template\" (a string) is missing");
    r.template_name = e["template"].get<std::string>();
    if (e.contains("args")) r.args = args_of(e["args"], where, r.label);
    if (e.contains("require_tuned")) {
      if (!e["require_tuned"].is_boolean())
        bad(where, r.label + ": require_tuned must be true or false");
      r.require_tuned = e["require_tuned"].get<bool>();
    }
    requests.push_back(std::move(r));
  }
  return requests;
}

std::vector<KernelRequest> read_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kIo, "cannot read the manifest " + path);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(ErrorKind::kIo, "cannot read the manifest " + path);
  return parse_manifest(text.str(), path);
}

}  // namespace ktune::deploy
