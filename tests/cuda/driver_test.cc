#include "cuda/driver.h"

#include <gtest/gtest.h>

#include <string>

namespace mpk::cuda {
namespace {

TEST(Driver, AvailabilityNeverThrowsAndIsStable) {
  bool first = false;
  EXPECT_NO_THROW(first = driver_available());
  EXPECT_EQ(driver_available(), first);
}

TEST(Driver, NoDriverMeansNoDeviceError) {
  if (driver_available()) GTEST_SKIP() << "a CUDA driver and device are present";
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is remembered, not retried
    try {
      Context ctx(0);
      FAIL() << "created a context without a driver";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::NoDevice);
      std::string msg = e.what();
      // Either the library is missing or it has nothing to offer; both say so plainly.
      bool clear = msg.find("no CUDA driver (libcuda.so.1 not found)") != std::string::npos ||
                   msg.find("CUDA driver") != std::string::npos ||
                   msg.find("no CUDA device") != std::string::npos;
      EXPECT_TRUE(clear) << msg;
    }
  }
  EXPECT_THROW(device_count(), Error);
  EXPECT_THROW(driver_version(), Error);
  EXPECT_THROW(device_props(0), Error);
}

TEST(Driver, MissingLibraryMessage) {
  if (driver_available()) GTEST_SKIP() << "a CUDA driver and device are present";
  try {
    driver_api();
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.find("libcuda.so.1 not found") == std::string::npos)
      GTEST_SKIP() << "libcuda.so.1 is installed but unusable: " << msg;
    EXPECT_EQ(msg.rfind("no CUDA driver (libcuda.so.1 not found): ", 0), 0u) << msg;
  }
}

TEST(Driver, CheckCuNamesTheCall) {
  EXPECT_NO_THROW(check_cu(CUDA_SUCCESS, "cuNothing"));
  try {
    check_cu(CUDA_ERROR_INVALID_VALUE, "cuSomething(42)");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cuda);
    EXPECT_EQ(std::string(e.what()).rfind("cuSomething(42) failed: ", 0), 0u) << e.what();
    if (driver_available()) {
      EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_INVALID_VALUE"), std::string::npos);
    }
  }
  try {
    check_cu(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
  }
}

TEST(DeviceProps, ArchPrefersArchSpecificTargetsFromHopper) {
  DeviceProps p;
  p.cc_major = 9;
  p.cc_minor = 0;
  EXPECT_EQ(p.arch(), "sm_90a");
  p.cc_major = 8;
  p.cc_minor = 6;
  EXPECT_EQ(p.arch(), "sm_86");
  p.cc_major = 10;
  p.cc_minor = 0;
  EXPECT_EQ(p.arch(), "sm_100a");
}

TEST(DeviceBuffer, EmptyBufferNeedsNoDriver) {
  DeviceBuffer b;
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.ptr(), CUdeviceptr{0});
  char c = 0;
  EXPECT_THROW(b.upload(&c, 1), Error);
  EXPECT_NO_THROW(b.upload(&c, 0));
}

}  // namespace
}  // namespace mpk::cuda
