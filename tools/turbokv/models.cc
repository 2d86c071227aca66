// Short model names (the ones scripts/fetch-models knows) resolved in the model
// cache, and `turbokv models`, which lists them with their state.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {

struct KnownModel {
  const char* name;
  const char* file;
};
// Must match the file names in scripts/fetch-models.
constexpr KnownModel kKnown[] = {
    {"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
    {"gemma3", "gemma-3-270m-q4_k_m.gguf"},
    {"qwen2.5-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"},
    {"qwen2.5-0.5b", "qwen2.5-coder-0.5b-instruct-q4.gguf"},
};

std::string known_names() {
  std::string s;
  for (const auto& m : kKnown) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

// A value that looks like a file (has a directory part or a .gguf suffix) is a path.
bool looks_like_path(const std::string& v) {
  return v.find('/') != std::string::npos ||
         (v.size() > 5 && v.compare(v.size() - 5, 5, ".gguf") == 0);
}

int run_models() {
  const std::string dir = model_cache_dir();
  std::printf("model cache: %s\n", dir.c_str());
  std::printf("| name | fetched | size | path | fetch with |\n|---|---|---|---|---|\n");
  for (const auto& m : kKnown) {
    const std::string path = dir + "/" + m.file;
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    std::printf("| %s | %s | %s | %s | scripts/fetch-models %s |\n", m.name, ec ? "no" : "yes",
                ec ? "-" : fmt::format("{:.1f} MiB", static_cast<double>(size) / 1048576).c_str(),
                path.c_str(), m.name);
  }
  return 0;
}

}  // namespace

std::string model_cache_dir() {
  if (const char* dir = std::getenv("TKV_MODEL_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/turbokv/models";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/turbokv/models";
}

std::string default_model_path() {
  if (const char* e = std::getenv("TKV_MODEL"); e && *e) return e;
  return model_cache_dir() + "/" + kKnown[0].file;
}

Result<std::string> resolve_model(const std::string& name) {
  if (name.empty()) return default_model_path();
  if (looks_like_path(name) || std::filesystem::exists(name)) return name;
  for (const auto& m : kKnown) {
    if (name != m.name) continue;
    const std::string path = model_cache_dir() + "/" + m.file;
    if (!std::filesystem::exists(path))
      return make_error(
          StatusCode::kNotFound,
          "[cli] model '{}' is not fetched: expected {} (run scripts/fetch-models {})", name, path,
          name);
    return path;
  }
  return make_error(StatusCode::kNotFound,
                    "[cli] unknown model '{}': not a file, and not a known name ({}; see "
                    "`turbokv models`)",
                    name, known_names());
}

RunFn add_models(CLI::App& app) {
  app.add_subcommand("models", "List the known short model names and where they are cached");
  return [] { return run_models(); };
}

}  // namespace tkv::cli
