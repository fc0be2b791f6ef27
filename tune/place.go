package tune

import (
	"github.com/tfswap/tfswap/graphdef"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// Place returns m with every node that has no device placed on device; "" returns m. In
// the two-device emulation, device is /device:CPU:1, which stands for the GPU: the original
// nodes go there, while tfswap's swap nodes keep their host device, /device:CPU:0.
func Place(m *graphdef.Model, device string) *graphdef.Model {
	if device == "" {
		return m
	}
	out := m.Clone()
	for i, nd := range out.Graph.Node {
		if nd.GetDevice() == "" {
			c := proto.Clone(nd).(*npb.NodeDef)
			c.Device = device
			out.Graph.Node[i] = c
		}
	}
	return out
}
