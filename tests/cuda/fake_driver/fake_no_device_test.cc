// A driver that loads but reports no device must be NoDevice with a clear message.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cuda/driver.h"

namespace mpk::cuda {
namespace {

// Before any test runs (and so before the driver loads): the fake reports zero devices.
const bool kNoDevices = setenv("MPK_FAKE_CUDA_DEVICES", "0", 1) == 0;

TEST(FakeDriverWithoutDevices, IsNoDevice) {
  ASSERT_TRUE(kNoDevices);
  bool available = driver_available();
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib && !dlsym(lib, "mpk_fake_cuda_state"))
    GTEST_SKIP() << "a real libcuda.so.1 was loaded instead of the fake one";
  ASSERT_TRUE(lib) << "the fake driver did not load";
  EXPECT_FALSE(available);
  try {
    Context ctx(0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NoDevice);
    std::string msg = e.what();
    EXPECT_EQ(msg, "no CUDA device found (driver 13.0 is loaded)");
  }
}

}  // namespace
}  // namespace mpk::cuda
