// Copies tensors out of the embedded interpreter as raw bytes, reading memory through DLPack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "python_runtime.hpp"

namespace cudal1::worker {

struct ExportedTensor {
  std::string dtype;  // "float32", "bfloat16", "int64", "bool", ...
  std::vector<int64_t> shape;
  std::string device;            // "cpu" or "cuda:N"
  bool exact_type = true;        // type(t) is torch.Tensor (not a subclass)
  std::vector<std::byte> bytes;  // compact row-major copy of the elements

  nlohmann::json describe() const;  // everything but the bytes
};

// Copies `size` bytes at device address `src` to host memory `dst`; throws on failure.
using DeviceToHostCopy = std::function<void(void* dst, std::uint64_t src, std::size_t size)>;

class TensorExporter {
 public:
  // Captures torch's exporter and type objects now, before user code can replace them.
  explicit TensorExporter(DeviceToHostCopy copy_from_device);

  bool is_tensor(py::handle value) const;
  ExportedTensor export_tensor(py::handle tensor) const;

 private:
  py::object to_dlpack_;
  py::object tensor_type_;
  py::object detach_;
  py::object to_;
  py::object bool_dtype_;
  py::object uint8_dtype_;
  DeviceToHostCopy copy_from_device_;
};

}  // namespace cudal1::worker
