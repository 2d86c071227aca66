// Content keys of full KV pages for prefix sharing: a hash chain over blocks of
// page_size tokens. Block i's key hashes (key of block i-1, its tokens), seeded
// by the cache's namespace, so a key names the whole prefix up to the block's
// end, not just its tokens. Keys live only in memory (host byte order).
#pragma once
#include <cstdint>

namespace tkv::kv {

// Key of the block tokens[0, page_size) whose predecessor's key is parent (0 for
// block 0), under namespace ns. tokens: [page_size]
uint64_t prefix_block_key(uint64_t ns, uint64_t parent, const int32_t* tokens, int page_size);

// Keys of the first n_blocks blocks of tokens into keys[0, n_blocks).
// tokens: [n_blocks * page_size], keys: [n_blocks]
void prefix_block_keys(uint64_t ns, const int32_t* tokens, int64_t n_blocks, int page_size,
                       uint64_t* keys);

}  // namespace tkv::kv
