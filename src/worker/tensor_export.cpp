#include "tensor_export.hpp"

#include <Python.h>

#include <cstring>
#include <stdexcept>

#include "cudal1/common/digest.hpp"
#include "cudal1/worker/protocol.hpp"
#include "dlpack_abi.hpp"

namespace cudal1::worker {
namespace {

std::string dtype_name(const dlpack::DataType& type) {
  if (type.lanes != 1) throw std::runtime_error("vector dtypes are not supported");
  const std::string bits = std::to_string(type.bits);
  switch (type.code) {
    case dlpack::kFloat:
      return "float" + bits;
    case dlpack::kBfloat:
      return "bfloat" + bits;
    case dlpack::kInt:
      return "int" + bits;
    case dlpack::kUInt:
      return "uint" + bits;
    case dlpack::kComplex:
      return "complex" + bits;
    case dlpack::kBool:
      return "bool";
    default:
      throw std::runtime_error("unsupported DLPack type code " + std::to_string(type.code));
  }
}

// Copies the elements of a strided view into a compact row-major buffer.
void gather(const std::byte* base, const std::vector<int64_t>& shape,
            const std::vector<int64_t>& strides, std::size_t element_size, std::byte* out) {
  const std::size_t ndim = shape.size();
  std::vector<int64_t> index(ndim, 0);
  std::size_t count = 1;
  for (auto extent : shape) count *= static_cast<std::size_t>(extent);
  for (std::size_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (std::size_t d = 0; d < ndim; ++d) offset += index[d] * strides[d];
    std::memcpy(out + n * element_size, base + offset * static_cast<int64_t>(element_size),
                element_size);
    for (std::size_t d = ndim; d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

bool is_compact(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

}  // namespace

nlohmann::json ExportedTensor::describe() const {
  namespace key = cudal1::worker_protocol::tensor;
  return {{key::kDtype, dtype},
          {key::kShape, shape},
          {key::kDevice, device},
          {key::kExactType, exact_type},
          {key::kNbytes, nbytes}};
}

// A tensor's memory as DLPack shows it, kept alive by the capsule.
struct TensorExporter::View {
  ExportedTensor described;  // no bytes
  std::vector<int64_t> strides;
  const std::byte* data = nullptr;
  std::size_t element_size = 0;
  std::size_t span_bytes = 0;  // of the memory the view touches
  bool compact = true;
  bool on_device = false;
  py::object capsule;
};

TensorExporter::TensorExporter(DeviceToHostCopy copy_from_device, DeviceWordSum device_word_sum)
    : copy_from_device_(std::move(copy_from_device)), device_word_sum_(std::move(device_word_sum)) {
  py::module_ torch = py::module_::import("torch");
  py::module_ dlpack_module = py::module_::import("torch.utils.dlpack");
  to_dlpack_ = dlpack_module.attr("to_dlpack");
  tensor_type_ = torch.attr("Tensor");
  detach_ = tensor_type_.attr("detach");
  to_ = tensor_type_.attr("to");
  bool_dtype_ = torch.attr("bool");
  uint8_dtype_ = torch.attr("uint8");
}

bool TensorExporter::is_tensor(py::handle value) const {
  return PyObject_IsInstance(value.ptr(), tensor_type_.ptr()) == 1;
}

TensorExporter::View TensorExporter::view_of(py::handle tensor) const {
  if (!is_tensor(tensor)) throw std::runtime_error("value is not a torch.Tensor");
  View view;
  ExportedTensor& out = view.described;
  out.exact_type = Py_TYPE(tensor.ptr()) == reinterpret_cast<PyTypeObject*>(tensor_type_.ptr());
  py::object plain = detach_(tensor);
  // Older DLPack exporters reject bool tensors; their bytes are the same as uint8's.
  const bool is_bool = py::object(plain.attr("dtype")).is(bool_dtype_);
  if (is_bool) plain = to_(plain, uint8_dtype_);
  view.capsule = to_dlpack_(plain);
  auto* managed =
      static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(view.capsule.ptr(), "dltensor"));
  if (managed == nullptr) throw py::error_already_set();
  const dlpack::Tensor& dl = managed->dl_tensor;

  out.dtype = is_bool ? "bool" : dtype_name(dl.dtype);
  out.shape.assign(dl.shape, dl.shape + dl.ndim);
  view.strides.resize(static_cast<std::size_t>(dl.ndim));
  if (dl.strides != nullptr) {
    view.strides.assign(dl.strides, dl.strides + dl.ndim);
  } else {
    int64_t s = 1;
    for (int d = dl.ndim; d-- > 0;) {
      view.strides[static_cast<std::size_t>(d)] = s;
      s *= dl.shape[d];
    }
  }
  std::size_t count = 1;
  for (auto extent : out.shape) count *= static_cast<std::size_t>(extent);
  view.element_size = dl.dtype.bits / 8;
  out.nbytes = count * view.element_size;
  // The span of memory the view touches (PyTorch strides are never negative).
  std::size_t span_elements = 1;
  for (std::size_t d = 0; d < out.shape.size(); ++d) {
    span_elements += static_cast<std::size_t>((out.shape[d] - 1) * view.strides[d]);
  }
  view.span_bytes = count == 0 ? 0 : span_elements * view.element_size;
  view.data = static_cast<const std::byte*>(dl.data) + dl.byte_offset;
  view.compact = is_compact(out.shape, view.strides);
  if (dl.device.device_type == dlpack::kCUDA) {
    out.device = "cuda:" + std::to_string(dl.device.device_id);
    view.on_device = true;
  } else if (dl.device.device_type == dlpack::kCPU) {
    out.device = "cpu";
  } else {
    throw std::runtime_error("tensor on unsupported device type " +
                             std::to_string(dl.device.device_type));
  }
  return view;
}

ExportedTensor TensorExporter::export_view(View& view) const {
  ExportedTensor out = std::move(view.described);
  out.bytes.resize(out.nbytes);
  if (out.nbytes == 0) return out;
  std::vector<std::byte> staging;
  const std::byte* host = view.data;
  if (view.on_device) {
    if (!copy_from_device_)
      throw std::runtime_error("tensor is on a CUDA device but CUDA is unavailable");
    const auto address = reinterpret_cast<std::uint64_t>(view.data);
    if (view.compact) {  // straight into the result: large outputs are not copied twice
      copy_from_device_(out.bytes.data(), address, out.bytes.size());
      return out;
    }
    staging.resize(view.span_bytes);
    copy_from_device_(staging.data(), address, view.span_bytes);
    host = staging.data();
  }
  if (view.compact) {
    std::memcpy(out.bytes.data(), host, out.bytes.size());
  } else {
    gather(host, out.shape, view.strides, view.element_size, out.bytes.data());
  }
  return out;
}

std::optional<std::uint64_t> TensorExporter::device_digest(const View& view) const {
  const auto address = reinterpret_cast<std::uint64_t>(view.data);
  if (!view.on_device || !view.compact || address % 8 != 0 || !device_word_sum_ ||
      !copy_from_device_) {
    return std::nullopt;
  }
  const std::size_t nbytes = view.described.nbytes;
  const auto sum = device_word_sum_(address, nbytes / 8);
  if (!sum) return std::nullopt;
  std::byte tail[8] = {};
  if (nbytes % 8 > 0) copy_from_device_(tail, address + nbytes / 8 * 8, nbytes % 8);
  return digest_finish(*sum, tail, nbytes);
}

ExportedTensor TensorExporter::export_tensor(py::handle tensor) const {
  View view = view_of(tensor);
  return export_view(view);
}

std::pair<ExportedTensor, std::uint64_t> TensorExporter::digest_tensor(py::handle tensor,
                                                                       bool with_bytes) const {
  View view = view_of(tensor);
  const std::optional<std::uint64_t> on_device = device_digest(view);
  if (on_device && !with_bytes) return {std::move(view.described), *on_device};
  ExportedTensor exported = export_view(view);
  const std::uint64_t digest =
      on_device ? *on_device : digest_bytes(exported.bytes.data(), exported.bytes.size());
  if (!with_bytes) exported.bytes = {};
  return {std::move(exported), digest};
}

}  // namespace cudal1::worker
