// GGUF metadata values: scalars, strings, typed arrays and arrays of arrays.
// Nested arrays are walked (bounded depth) and skipped, not stored: ggml itself
// rejects them and no model uses them, but a reader must not crash on them.
// Reference: ggml/docs/gguf.md (gguf_metadata_value_t), ggml/src/gguf.cpp.
#include <limits>

#include "io/gguf_cursor.h"

namespace tkv::io::detail {
namespace {

constexpr int kMaxArrayDepth = 8;

bool is_known(uint32_t id) {
  return id <= static_cast<uint32_t>(GgufType::kFloat64);
}

// Bytes of one scalar of type t; 0 for string and array.
size_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

// Smallest encoding of one array element: bounds a count before any allocation.
size_t min_elem_bytes(GgufType t) {
  if (t == GgufType::kString) return 8;  // u64 length
  if (t == GgufType::kArray) return 12;  // u32 type + u64 count
  return scalar_bytes(t);
}

template <typename T>
Status read_as(GgufCursor& cur, std::string_view what, T* out) {
  return cur.read(out, what);
}

// One numeric / bool scalar, widened into the variant.
Status read_scalar(GgufCursor& cur, GgufType t,
                   std::variant<uint64_t, int64_t, double, bool, std::string>* out) {
  const std::string_view what = "value";
  switch (t) {
    case GgufType::kUint8: {
      uint8_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = uint64_t{v};
      return {};
    }
    case GgufType::kUint16: {
      uint16_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = uint64_t{v};
      return {};
    }
    case GgufType::kUint32: {
      uint32_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = uint64_t{v};
      return {};
    }
    case GgufType::kUint64: {
      uint64_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = v;
      return {};
    }
    case GgufType::kInt8: {
      int8_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = int64_t{v};
      return {};
    }
    case GgufType::kInt16: {
      int16_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = int64_t{v};
      return {};
    }
    case GgufType::kInt32: {
      int32_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = int64_t{v};
      return {};
    }
    case GgufType::kInt64: {
      int64_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = v;
      return {};
    }
    case GgufType::kFloat32: {
      float v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = double{v};
      return {};
    }
    case GgufType::kFloat64: {
      double v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      *out = v;
      return {};
    }
    case GgufType::kBool: {
      uint8_t v;
      TKV_RETURN_IF_ERROR(read_as(cur, what, &v));
      if (v > 1) return cur.error("bool value {} is neither 0 nor 1", v);
      *out = v == 1;
      return {};
    }
    case GgufType::kString: {
      std::string s;
      TKV_RETURN_IF_ERROR(cur.read_string(&s, what));
      *out = std::move(s);
      return {};
    }
    case GgufType::kArray:
      break;
  }
  return cur.error("internal: read_scalar on an array");
}

double widen(const std::variant<uint64_t, int64_t, double, bool, std::string>& v) {
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
  return 0.0;
}

// Reads an array header (elem type, count) and checks the count against the bytes left.
Status read_array_header(GgufCursor& cur, GgufType* elem, uint64_t* count) {
  uint32_t id = 0;
  TKV_RETURN_IF_ERROR(cur.read(&id, "array element type"));
  if (!is_known(id)) return cur.error("unknown array element type id {}", id);
  *elem = static_cast<GgufType>(id);
  TKV_RETURN_IF_ERROR(cur.read(count, "array length"));
  if (*count > cur.remaining() / min_elem_bytes(*elem)) {
    return cur.error("array of {} {} elements cannot fit in the {} bytes left", *count,
                     gguf_type_name(*elem), cur.remaining());
  }
  return {};
}

// Walks a nested array without storing it. depth counts enclosing arrays.
Status skip_array(GgufCursor& cur, int depth) {
  if (depth > kMaxArrayDepth) return cur.error("arrays nested deeper than {}", kMaxArrayDepth);
  GgufType elem{};
  uint64_t count = 0;
  TKV_RETURN_IF_ERROR(read_array_header(cur, &elem, &count));
  if (elem == GgufType::kArray) {
    for (uint64_t i = 0; i < count; ++i) TKV_RETURN_IF_ERROR(skip_array(cur, depth + 1));
  } else if (elem == GgufType::kString) {
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t len = 0;
      TKV_RETURN_IF_ERROR(cur.read(&len, "string length"));
      TKV_RETURN_IF_ERROR(cur.skip(len, "string"));
    }
  } else {
    TKV_RETURN_IF_ERROR(cur.skip(count * scalar_bytes(elem), "array data"));
  }
  return {};
}

Status read_array(GgufCursor& cur, GgufValue* out) {
  uint64_t count = 0;
  TKV_RETURN_IF_ERROR(read_array_header(cur, &out->elem_type, &count));
  out->array_len = static_cast<size_t>(count);
  if (out->elem_type == GgufType::kArray) {
    for (uint64_t i = 0; i < count; ++i) TKV_RETURN_IF_ERROR(skip_array(cur, 2));
    return {};
  }
  if (out->elem_type == GgufType::kString) {
    out->strings.reserve(out->array_len);  // bounded: count <= remaining / 8
    for (uint64_t i = 0; i < count; ++i) {
      out->strings.emplace_back();
      TKV_RETURN_IF_ERROR(cur.read_string(&out->strings.back(), "string array element"));
    }
    return {};
  }
  out->numbers.reserve(out->array_len);  // bounded: count <= remaining / elem bytes
  std::variant<uint64_t, int64_t, double, bool, std::string> v;
  for (uint64_t i = 0; i < count; ++i) {
    TKV_RETURN_IF_ERROR(read_scalar(cur, out->elem_type, &v));
    out->numbers.push_back(widen(v));
  }
  return {};
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
      return "u8";
    case GgufType::kInt8:
      return "i8";
    case GgufType::kUint16:
      return "u16";
    case GgufType::kInt16:
      return "i16";
    case GgufType::kUint32:
      return "u32";
    case GgufType::kInt32:
      return "i32";
    case GgufType::kFloat32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "u64";
    case GgufType::kInt64:
      return "i64";
    case GgufType::kFloat64:
      return "f64";
  }
  return "?";
}

Status read_gguf_value(GgufCursor& cur, uint32_t type_id, GgufValue* out) {
  if (!is_known(type_id)) return cur.error("unknown value type id {}", type_id);
  out->type = static_cast<GgufType>(type_id);
  if (out->type == GgufType::kArray) return read_array(cur, out);
  return read_scalar(cur, out->type, &out->scalar);
}

}  // namespace tkv::io::detail
