// The DLPack exchange structures (ABI version 0.x, as exported by torch.utils.dlpack.to_dlpack).
// Declared here from the public specification so the worker reads tensor memory through a C
// struct instead of Python attributes that user code could replace.
#pragma once

#include <cstdint>

namespace cudal1::worker::dlpack {

enum DeviceType : int32_t { kCPU = 1, kCUDA = 2 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kComplex = 5, kBool = 6 };

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

}  // namespace cudal1::worker::dlpack
