// Whether the tests run under ASan/UBSan (about 10x slower): such builds run the
// same tests on smaller sizes; the release build keeps the full ones.
#pragma once

namespace tkv::testing {
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace tkv::testing
