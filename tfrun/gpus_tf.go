//go:build tensorflow

package tfrun

/*
#cgo CXXFLAGS: -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -DEIGEN_MAX_ALIGN_BYTES=64
#include <stdlib.h>
#include "tensorflow/c/c_api.h"
TF_Buffer* tfswap_device_attributes(const TF_DeviceList* list, int i);
*/
import "C"

import (
	"fmt"

	dapb "github.com/wamuir/graft/tensorflow/core/framework/device_attributes_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

// Devices returns the session's devices (TF_SessionListDevices): name, type and memory
// limit from the C API, and the physical description from the DeviceAttributes behind it.
func (s *Session) Devices() ([]DeviceInfo, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("tfrun: list devices of a closed session")
	}
	st := newStatus()
	defer st.free()
	list := C.TF_SessionListDevices(s.sess, st.c)
	if err := st.err("list devices"); err != nil {
		return nil, err
	}
	defer C.TF_DeleteDeviceList(list)
	n := int(C.TF_DeviceListCount(list))
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		d := DeviceInfo{
			Name:        C.GoString(C.TF_DeviceListName(list, C.int(i), st.c)),
			Type:        C.GoString(C.TF_DeviceListType(list, C.int(i), st.c)),
			MemoryBytes: int64(C.TF_DeviceListMemoryBytes(list, C.int(i), st.c)),
		}
		if err := st.err("list devices"); err != nil {
			return nil, err
		}
		attrs, err := deviceAttributes(list, i)
		if err != nil {
			return nil, err
		}
		if attrs.GetName() != d.Name || attrs.GetMemoryLimit() != d.MemoryBytes {
			return nil, fmt.Errorf("tfrun: device %d: the device list's attributes (%s, %d bytes) do not match the C API's (%s, %d bytes)",
				i, attrs.GetName(), attrs.GetMemoryLimit(), d.Name, d.MemoryBytes)
		}
		d.Description = attrs.GetPhysicalDeviceDesc()
		out = append(out, d)
	}
	return out, nil
}

// deviceAttributes returns device i of list as TensorFlow's DeviceAttributes proto.
func deviceAttributes(list *C.TF_DeviceList, i int) (*dapb.DeviceAttributes, error) {
	buf := C.tfswap_device_attributes(list, C.int(i))
	if buf == nil {
		return nil, fmt.Errorf("tfrun: device %d: no device attributes", i)
	}
	defer C.TF_DeleteBuffer(buf)
	attrs := &dapb.DeviceAttributes{}
	if err := proto.Unmarshal(bufferBytes(buf), attrs); err != nil {
		return nil, fmt.Errorf("tfrun: device %d: parse DeviceAttributes: %w", i, err)
	}
	return attrs, nil
}

// ListDevices creates a session on an empty graph with config (a serialized ConfigProto;
// nil for TensorFlow's defaults) and returns its devices. On a GPU machine this initialises
// CUDA in the calling process and creates TensorFlow's GPU allocators, which live as long as
// the process: a program that will measure GPU memory should list devices in a process of
// its own.
func ListDevices(config []byte) ([]DeviceInfo, error) {
	s, err := NewSession(nil, config)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Devices()
}

// gpuListConfig is the session configuration VisibleGPUs lists devices with: GPU memory
// grown on demand (GPUOptions.allow_growth), so that the listing session does not take the
// GPU's memory, and no per-session thread pools beyond one thread each.
var gpuListConfig = &ConfigProto{
	GpuOptions:                &cpb.GPUOptions{AllowGrowth: true},
	InterOpParallelismThreads: 1,
	IntraOpParallelismThreads: 1,
}

// VisibleGPUs returns the GPUs TensorFlow's runtime sees in this process (none on a machine
// without a GPU or with a CPU-only TensorFlow), each with the memory limit TensorFlow's
// allocator will have on it. The listing session grows GPU memory on demand, so it takes
// little more than the CUDA context; the memory limit it reports is the one a session with
// default GPU options gets.
func VisibleGPUs() ([]GPU, error) {
	cfg, err := MarshalConfig(gpuListConfig)
	if err != nil {
		return nil, err
	}
	return DetectGPUs(func() ([]DeviceInfo, error) { return ListDevices(cfg) })
}
