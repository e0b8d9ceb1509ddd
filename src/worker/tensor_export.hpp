// Copies tensors out of the embedded interpreter as raw bytes, reading memory through DLPack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python_runtime.hpp"

namespace cudal1::worker {

struct ExportedTensor {
  std::string dtype;  // "float32", "bfloat16", "int64", "bool", ...
  std::vector<int64_t> shape;
  std::string device;            // "cpu" or "cuda:N"
  bool exact_type = true;        // type(t) is torch.Tensor (not a subclass)
  std::size_t nbytes = 0;        // of the compact elements
  std::vector<std::byte> bytes;  // compact row-major copy of the elements (export_tensor only)

  nlohmann::json describe() const;  // everything but the bytes
};

// Copies `size` bytes at device address `src` to host memory `dst`; throws on failure.
using DeviceToHostCopy = std::function<void(void* dst, std::uint64_t src, std::size_t size)>;
// The digest's sum over `words` 8-byte words of device memory at `src`, computed on the device;
// nullopt when it cannot be.
using DeviceWordSum =
    std::function<std::optional<std::uint64_t>(std::uint64_t src, std::size_t words)>;

class TensorExporter {
 public:
  // Captures torch's exporter and type objects now, before user code can replace them.
  TensorExporter(DeviceToHostCopy copy_from_device, DeviceWordSum device_word_sum);

  bool is_tensor(py::handle value) const;
  ExportedTensor export_tensor(py::handle tensor) const;
  // The tensor's description, its bytes when `with_bytes` (as export_tensor), and the digest of
  // its compact bytes: the same number digest_bytes gives for export_tensor's bytes. A dense,
  // aligned device tensor is digested where it lies, without a copy to the host.
  std::pair<ExportedTensor, std::uint64_t> digest_tensor(py::handle tensor,
                                                         bool with_bytes = false) const;

 private:
  struct View;
  View view_of(py::handle tensor) const;
  ExportedTensor export_view(View& view) const;  // takes the view's description
  std::optional<std::uint64_t> device_digest(const View& view) const;

  py::object to_dlpack_;
  py::object tensor_type_;
  py::object detach_;
  py::object to_;
  py::object bool_dtype_;
  py::object uint8_dtype_;
  DeviceToHostCopy copy_from_device_;
  DeviceWordSum device_word_sum_;
};

}  // namespace cudal1::worker
