// turbokv kv inspect FILE: a KV snapshot's header (scheme, bits, model identity,
// shapes, tokens, bytes), checked but without loading a model; through the
// public API (turbokv::inspect_snapshot).
#include <cstdio>

#include "tools/turbokv/commands.h"

namespace tkv::cli {
namespace {
struct KvArgs {
  std::string file;
  bool tokens = false;
  CLI::App* inspect = nullptr;
};

int run_inspect(const KvArgs& a) {
  auto r = turbokv::inspect_snapshot(a.file);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", r.status().message().c_str());
    return 1;
  }
  const turbokv::SnapshotInfo& i = r.value();
  std::printf("file:         %s\n", a.file.c_str());
  std::printf("format:       turbokv KV snapshot v%u\n", i.version);
  std::printf("scheme:       %s (kind %s, k%d v%d bits)\n", i.scheme.c_str(), i.kind.c_str(),
              i.k_bits, i.v_bits);
  std::printf("model id:     %016llx\n", static_cast<unsigned long long>(i.model_id));
  std::printf("layers:       %d\nkv heads:     %d\nhead_dim:     %d\npage size:    %d\n",
              i.n_layers, i.n_kv_heads, i.head_dim, i.page_size);
  std::printf("key center:   %s\nquant start:  %lld\nswa format:   %s\n",
              i.key_center ? "on" : "off", static_cast<long long>(i.quant_start),
              i.swa_bf16 ? "bf16" : "quant");
  std::printf("tokens:       %lld\n", static_cast<long long>(i.n_tokens));
  std::printf("bytes:        %zu (header %zu, pages %zu)\n", i.file_bytes, i.header_bytes,
              i.file_bytes - i.header_bytes);
  if (a.tokens) {
    std::printf("token ids:   ");
    for (int32_t t : i.tokens) std::printf(" %d", t);
    std::printf("\n");
  }
  return 0;
}
}  // namespace

RunFn add_kv(CLI::App& app) {
  auto a = std::make_shared<KvArgs>();
  CLI::App* kv = app.add_subcommand("kv", "KV snapshot files (--save-session)");
  kv->require_subcommand(1);
  a->inspect = kv->add_subcommand("inspect", "Print a KV snapshot's header");
  a->inspect->add_option("file", a->file, "Snapshot file")->required();
  a->inspect->add_flag("--tokens", a->tokens, "Also print the token ids");
  return [a] { return run_inspect(*a); };
}

}  // namespace tkv::cli
