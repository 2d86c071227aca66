// TKV_CHECK: aborts on a broken internal invariant (never for bad input from
// outside — that is a Status). Active in every build type.
#pragma once
#include <cstdio>
#include <cstdlib>

#define TKV_CHECK(cond)                                                                         \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "[check] %s:%d: TKV_CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

#define TKV_CHECK_MSG(cond, msg)                                                        \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "[check] %s:%d: %s (%s)\n", __FILE__, __LINE__, msg, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
