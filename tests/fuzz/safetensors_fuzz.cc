// The safetensors container parser: the input is a whole file (8-byte header length, JSON
// header, data section). Every tensor it accepts must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_util.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes, so a read past the end is caught by ASan.
  std::vector<std::byte> file(reinterpret_cast<const std::byte*>(data),
                              reinterpret_cast<const std::byte*>(data) + size);
  mpk::fuzz::expect_mpk_errors_only([&] {
    auto tensors = mpk::model::parse_safetensors(file.data(), file.size(), "fuzz.safetensors");
    for (const auto& t : tensors) {
      const std::byte* end = file.data() + file.size();
      bool inside = t.nbytes == 0 || (t.data >= file.data() && t.data + t.nbytes <= end);
      if (!inside || size_t(t.numel()) * mpk::dtype_size(t.dtype) != t.nbytes) {
        std::fprintf(stderr, "fuzz: tensor '%s' accepted with a bad span\n", t.name.c_str());
        std::abort();
      }
      mpk::fuzz::touch(t.data, t.nbytes);
    }
  });
  return 0;
}
