// RequestHandle and Tokenizer (include/turbokv/engine.h): thin views over the
// runtime's RequestState and the model's tokenizer.
#include "api/handle.h"

#include "api/convert.h"

namespace turbokv {

bool RequestHandle::next(Event& e) {
  if (!impl_) return false;
  tkv::runtime::Event re;
  if (!impl_->state->next(re)) return false;
  e = detail::to_public(re);
  return true;
}

Event RequestHandle::wait() {
  if (!impl_) return {};
  return detail::to_public(impl_->state->wait());
}

void RequestHandle::cancel() {
  if (impl_) impl_->state->cancel();
}

bool RequestHandle::done() const {
  return !impl_ || impl_->state->done();
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return impl_->tok->encode(text, add_special, parse_special);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  return impl_->tok->decode(ids);
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  return impl_->tok->token_to_piece(id);
}

Result<std::string> Tokenizer::apply_chat_template(const std::vector<ChatMessage>& msgs,
                                                   bool add_assistant) const {
  std::vector<tkv::tok::ChatMessage> m;
  m.reserve(msgs.size());
  for (const ChatMessage& x : msgs) m.push_back({x.role, x.content});
  return impl_->tok->apply_chat_template(m, add_assistant);
}

bool Tokenizer::is_eog(int32_t id) const {
  return impl_->tok->is_eog(id);
}
bool Tokenizer::add_bos() const {
  return impl_->tok->add_bos();
}
int32_t Tokenizer::n_vocab() const {
  return impl_->tok->n_vocab();
}
int32_t Tokenizer::bos_id() const {
  return impl_->tok->bos_id();
}
int32_t Tokenizer::eos_id() const {
  return impl_->tok->eos_id();
}

}  // namespace turbokv
