//go:build tensorflow

// device_attributes.cc reads what TensorFlow's C API does not expose of a session's device
// list: each device's DeviceAttributes proto, whose physical_device_desc holds a GPU's model
// name and compute capability. TF_DeviceList is opaque in c_api.h; c_api_internal.h, which
// the TensorFlow wheel ships with the other headers, defines it as a vector of
// DeviceAttributes, the list DirectSession::ListDevices fills.

#include <string>

#include "tensorflow/c/c_api_internal.h"

extern "C" {

// tfswap_device_attributes returns device i of list as a serialized DeviceAttributes, or
// NULL when i is out of range. The caller deletes the buffer with TF_DeleteBuffer.
TF_Buffer* tfswap_device_attributes(const TF_DeviceList* list, int i) {
  if (list == nullptr || i < 0 || static_cast<size_t>(i) >= list->response.size()) {
    return nullptr;
  }
  std::string bytes;
  if (!list->response[i].SerializeToString(&bytes)) {
    return nullptr;
  }
  return TF_NewBufferFromString(bytes.data(), bytes.size());
}

}  // extern "C"
