// The pimpl bodies of RequestHandle and Tokenizer (include/turbokv/engine.h).
#pragma once
#include <memory>

#include "runtime/request_state.h"
#include "tokenizer/tokenizer.h"
#include "turbokv/engine.h"

namespace turbokv {

struct RequestHandle::Impl {
  std::shared_ptr<tkv::runtime::RequestState> state;
};

struct Tokenizer::Impl {
  const tkv::tok::Tokenizer* tok = nullptr;
};

}  // namespace turbokv
