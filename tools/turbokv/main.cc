// turbokv: one binary, subcommands generate | chat | serve | bench | eval | models | kv |
// synth-model.
#include <cstdio>
#include <cstring>
#include <map>

#include "tools/turbokv/commands.h"

#ifndef TKV_VERSION
#define TKV_VERSION "unknown"
#endif

int main(int argc, char** argv) {
  CLI::App app{"turbokv: LLM inference with a TurboQuant-compressed KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("turbokv ") + TKV_VERSION);
  // Every option's default is shown in --help (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  std::map<std::string, tkv::cli::RunFn> runs;
  runs["generate"] = tkv::cli::add_generate(app);
  runs["chat"] = tkv::cli::add_chat(app);
  runs["bench"] = tkv::cli::add_bench(app);
  runs["eval"] = tkv::cli::add_eval(app);
  runs["models"] = tkv::cli::add_models(app);
  runs["serve"] = tkv::cli::add_serve(app);
  runs["kv"] = tkv::cli::add_kv(app);
  runs["synth-model"] = tkv::cli::add_synth_model(app);
  // CLI11 answers an unknown first word with "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-' && runs.count(argv[1]) == 0) {
    std::string names;
    for (const auto& [name, _] : runs) names += (names.empty() ? "" : ", ") + name;
    std::fprintf(stderr, "error: unknown subcommand '%s' (available: %s; see turbokv --help)\n",
                 argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto* sub : app.get_subcommands()) return runs[sub->get_name()]();
  return 1;
}
