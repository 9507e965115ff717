#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "base/error.h"
#include "model/json_util.h"

namespace mpk::model {
namespace {

using detail::Json;

// Every dtype name of the safetensors format; only the floating ones mpk computes in load.
constexpr const char* kKnownDtypes[] = {"BOOL", "U8",  "I8",      "I16",     "U16",     "I32",
                                        "U32",  "I64", "U64",     "F64",     "F8_E4M3", "F8_E5M2",
                                        "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};

DType parse_dtype(const Json& v, const std::string& where) {
  MPK_CHECK(v.is_string(), InvalidModel) << where << ": 'dtype' must be a string, got "
                                         << detail::describe(v);
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  for (const char* k : kKnownDtypes)
    MPK_CHECK(s != k, Unsupported) << where << ": dtype " << s
                                   << " is not supported (expected F32, F16 or BF16)";
  MPK_THROW(InvalidModel) << where << ": unknown dtype '" << s << "'";
}

uint64_t non_negative(const Json& v, const std::string& where, const char* what) {
  int64_t n = detail::as_int64(v, where, what);
  MPK_CHECK(n >= 0, InvalidModel) << where << ": " << what << " must be non-negative, got " << n;
  return uint64_t(n);
}

struct Span {
  uint64_t begin, end;
  const std::string* name;
};

Tensor parse_entry(const std::string& name, const Json& e, const std::byte* base,
                   uint64_t data_size, const std::string& origin, Span& span) {
  std::string where = origin + ": tensor '" + name + "'";
  MPK_CHECK(e.is_object(), InvalidModel) << where << ": entry must be an object, got "
                                         << detail::describe(e);
  for (const char* key : {"dtype", "shape", "data_offsets"})
    MPK_CHECK(e.contains(key), InvalidModel) << where << ": missing '" << key << "'";
  Tensor t;
  t.name = name;
  t.dtype = parse_dtype(e["dtype"], where);

  const Json& shape = e["shape"];
  MPK_CHECK(shape.is_array(), InvalidModel) << where << ": 'shape' must be a list, got "
                                            << detail::describe(shape);
  uint64_t numel = 1;
  bool overflow = false;
  for (const Json& d : shape) {
    uint64_t n = non_negative(d, where, "shape dimension");
    t.shape.push_back(int64_t(n));
    overflow |= __builtin_mul_overflow(numel, n, &numel);
  }
  uint64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(numel, uint64_t(dtype_size(t.dtype)), &nbytes);
  MPK_CHECK(!overflow, InvalidModel) << where << ": shape is too large";

  const Json& offs = e["data_offsets"];
  MPK_CHECK(offs.is_array() && offs.size() == 2, InvalidModel)
      << where << ": 'data_offsets' must be [begin, end], got " << detail::describe(offs);
  uint64_t begin = non_negative(offs[0], where, "data_offsets begin");
  uint64_t end = non_negative(offs[1], where, "data_offsets end");
  MPK_CHECK(begin <= end && end <= data_size, InvalidModel)
      << where << ": data_offsets [" << begin << ", " << end << "] are not a range inside the "
      << data_size << "-byte data section";
  MPK_CHECK(end - begin == nbytes, InvalidModel)
      << where << ": data_offsets span " << end - begin << " bytes but dtype "
      << dtype_name(t.dtype) << " x shape " << shape_to_string(t.shape) << " needs " << nbytes;
  t.data = base + begin;
  t.nbytes = size_t(nbytes);
  span = {begin, end, nullptr};
  return t;
}

}  // namespace

std::vector<Tensor> parse_safetensors(const std::byte* data, size_t size, const std::string& origin) {
  MPK_CHECK(size >= 8, InvalidModel) << origin << ": file is " << size
                                     << " bytes, shorter than the 8-byte safetensors header length";
  uint8_t len_bytes[8];
  std::memcpy(len_bytes, data, 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  MPK_CHECK(header_len <= kMaxSafetensorsHeaderBytes, InvalidModel)
      << origin << ": header length " << header_len << " exceeds the "
      << kMaxSafetensorsHeaderBytes << "-byte limit (not a safetensors file?)";
  MPK_CHECK(header_len <= size - 8, InvalidModel)
      << origin << ": header length " << header_len << " runs past the end of the " << size
      << "-byte file (truncated?)";

  std::string_view text(reinterpret_cast<const char*>(data) + 8, size_t(header_len));
  Json header = detail::parse_json(text, origin + " (safetensors header)");
  MPK_CHECK(header.is_object(), InvalidModel)
      << origin << ": safetensors header must be a JSON object, got " << detail::describe(header);

  const std::byte* base = data + 8 + header_len;
  uint64_t data_size = size - 8 - header_len;
  std::vector<Tensor> tensors;
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    Span span{};
    tensors.push_back(parse_entry(name, entry, base, data_size, origin, span));
    spans.push_back(span);
  }
  for (size_t i = 0; i < spans.size(); ++i) spans[i].name = &tensors[i].name;
  // Empty tensors occupy no bytes and cannot overlap anything.
  std::erase_if(spans, [](const Span& s) { return s.begin == s.end; });
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    MPK_CHECK(spans[i].begin >= spans[i - 1].end, InvalidModel)
        << origin << ": tensors '" << *spans[i - 1].name << "' [" << spans[i - 1].begin << ", "
        << spans[i - 1].end << ") and '" << *spans[i].name << "' [" << spans[i].begin << ", "
        << spans[i].end << ") overlap";
    // As the format's reference reader requires: bytes no tensor names would still be read
    // (and held) with the file.
    MPK_CHECK(spans[i].begin == spans[i - 1].end, InvalidModel)
        << origin << ": " << spans[i].begin - spans[i - 1].end << " byte(s) between tensors '"
        << *spans[i - 1].name << "' and '" << *spans[i].name << "' belong to no tensor";
  }
  const uint64_t first = spans.empty() ? 0 : spans.front().begin, last = spans.empty() ? 0 : spans.back().end;
  MPK_CHECK(first == 0 && last == data_size, InvalidModel)
      << origin << ": the tensors hold bytes [" << first << ", " << last << ") of a " << data_size
      << "-byte data section; the rest belongs to no tensor";
  return tensors;
}

}  // namespace mpk::model
