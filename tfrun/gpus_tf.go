//go:build tensorflow

package tfrun

/*
#include <stdlib.h>
#include "tensorflow/c/c_api.h"
*/
import "C"

import cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

// gpuListConfig is the session configuration VisibleGPUs lists devices with: GPU memory
// grown on demand (GPUOptions.allow_growth), so that the listing session does not take the
// GPU's memory, and no per-session thread pools beyond one thread each.
var gpuListConfig = &ConfigProto{
	GpuOptions:                &cpb.GPUOptions{AllowGrowth: true},
	InterOpParallelismThreads: 1,
	IntraOpParallelismThreads: 1,
}

// ListDevices returns the devices a session created with config (a serialized ConfigProto;
// nil for TensorFlow's defaults) gets from TensorFlow's runtime in this process, through the
// C API's device list (TF_SessionListDevices on a session over an empty graph).
func ListDevices(config []byte) ([]RuntimeDevice, error) {
	s, err := NewSession(nil, config)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	st := newStatus()
	defer st.free()
	list := C.TF_SessionListDevices(s.sess, st.c)
	if err := st.err("list devices"); err != nil {
		return nil, err
	}
	defer C.TF_DeleteDeviceList(list)
	n := int(C.TF_DeviceListCount(list))
	out := make([]RuntimeDevice, 0, n)
	for i := 0; i < n; i++ {
		d := RuntimeDevice{
			Name:        C.GoString(C.TF_DeviceListName(list, C.int(i), st.c)),
			Type:        C.GoString(C.TF_DeviceListType(list, C.int(i), st.c)),
			MemoryBytes: int64(C.TF_DeviceListMemoryBytes(list, C.int(i), st.c)),
		}
		if err := st.err("list devices"); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// VisibleGPUs returns the GPUs TensorFlow's runtime sees in this process (none on a machine
// without a GPU or with a CPU-only TensorFlow), each with the memory limit TensorFlow's
// allocator will have on it. The listing session grows GPU memory on demand, so it takes
// little more than the CUDA context; the memory limit it reports is the one a session with
// default GPU options gets.
func VisibleGPUs() ([]RuntimeDevice, error) {
	cfg, err := MarshalConfig(gpuListConfig)
	if err != nil {
		return nil, err
	}
	devs, err := ListDevices(cfg)
	if err != nil {
		return nil, err
	}
	return GPUs(devs), nil
}
