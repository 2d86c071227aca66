// turbokv: one binary, subcommands generate | chat | bench (serve and eval come later).
#include <cstdio>
#include <map>

#include "tools/turbokv/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"turbokv: LLM inference with a TurboQuant-compressed KV cache"};
  app.require_subcommand(1);
  std::map<std::string, tkv::cli::RunFn> runs;
  runs["generate"] = tkv::cli::add_generate(app);
  runs["chat"] = tkv::cli::add_chat(app);
  runs["bench"] = tkv::cli::add_bench(app);
  runs["eval"] = tkv::cli::add_eval(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto* sub : app.get_subcommands()) return runs[sub->get_name()]();
  return 1;
}
