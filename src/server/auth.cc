// Bearer-token check (see auth.h): the whole header is compared, every byte,
// so the time taken says nothing about how much of the key matched.
#include "server/auth.h"

#include <httplib.h>

namespace tkv::server {

bool authorized(const httplib::Request& req, const std::string& api_key) {
  const std::string want = "Bearer " + api_key;
  const std::string got = req.get_header_value("Authorization");
  unsigned diff = got.size() == want.size() ? 0u : 1u;
  for (size_t i = 0; i < want.size(); ++i)
    diff |= static_cast<unsigned char>(want[i]) ^
            static_cast<unsigned char>(i < got.size() ? got[i] : 0);
  return diff == 0;
}

}  // namespace tkv::server
