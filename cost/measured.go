package cost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/tfswap/tfswap/graphdef"
)

// MeasuredFormat and MeasuredVersion identify a measured op profile file: per-node compute
// times taken from real training iterations (what `tfswap profile` writes). The format:
//
//	{
//	  "format": "tfswap-op-profile",
//	  "version": 1,
//	  "device": {"name": "/job:localhost/replica:0/task:0/device:GPU:0",
//	             "model": "Tesla V100-SXM2-16GB", "profile": "v100-16gb-nvlink"},
//	  "tensorflow_version": "2.18.0",
//	  "graph": "resnet.pb",
//	  "iterations": 10,
//	  "nodes": [
//	    {"name": "stem/conv/Conv2D", "op": "Conv2D",
//	     "device": "/job:localhost/replica:0/task:0/device:GPU:0",
//	     "compute_ns": 41250, "output_bytes": [524288]}
//	  ]
//	}
//
// device names the compute device the profile was taken on: name as TensorFlow reports it,
// model the hardware, profile the tfswap device profile it corresponds to (optional; the
// simulator warns when it differs from the profile simulated). Each node gives its name, op
// and device as they ran, compute_ns the op's time on its device from start to end (the
// median over the measured iterations, in nanoseconds; not including time waiting for
// inputs), and optionally output_bytes, the bytes allocated for each output port (-1 when
// unknown). Required: format, version, device.name, iterations >= 1, and for every node name
// and compute_ns >= 0. Unknown fields are errors.
//
// Optional, written by `tfswap profile`: "machine" describes the computer the profile was
// taken on ({"hostname", "os", "arch", "cpu", "cpus", "gpus": [...], "onednn": bool}), for
// the reader; the simulator does not use it.
//
// Scaling rule (Options.ScaleMeasured). A node's measurement is used as it is when it was
// taken on the kind of device the node is simulated on: the same device type, and for GPUs
// the same tfswap profile when device.profile names one. A node measured on another device
// (a CPU profile used to simulate a GPU, or a T4 profile simulating a V100) is scaled by one
// factor per simulation, S = (sum of the analytical estimates on the simulated device) /
// (sum of the measured times), both summed over the nodes measured on another device: the
// measurement gives the ops' relative times, the simulated device's profile the overall
// speed. Without ScaleMeasured such nodes keep their analytical estimates.
const (
	MeasuredFormat  = "tfswap-op-profile"
	MeasuredVersion = 1
)

// Measured is a measured op profile.
type Measured struct {
	Format            string         `json:"format"`
	Version           int            `json:"version"`
	Device            MeasuredDevice `json:"device"`
	TensorFlowVersion string         `json:"tensorflow_version,omitempty"`
	Graph             string         `json:"graph,omitempty"`
	Iterations        int            `json:"iterations"`
	// Machine describes the computer the profile was taken on (optional).
	Machine *MeasuredMachine `json:"machine,omitempty"`
	Nodes   []MeasuredNode   `json:"nodes"`

	byName map[string]*MeasuredNode
}

// MeasuredDevice is the device a profile was measured on.
type MeasuredDevice struct {
	Name    string `json:"name"`
	Model   string `json:"model,omitempty"`
	Profile string `json:"profile,omitempty"`
}

// MeasuredMachine describes the computer a profile was taken on: host name, operating system
// and architecture (Go's GOOS and GOARCH), CPU model and logical CPU count, the GPUs found,
// and whether TensorFlow's oneDNN optimizations were on.
type MeasuredMachine struct {
	Hostname string   `json:"hostname,omitempty"`
	OS       string   `json:"os,omitempty"`
	Arch     string   `json:"arch,omitempty"`
	CPU      string   `json:"cpu,omitempty"`
	CPUs     int      `json:"cpus,omitempty"`
	GPUs     []string `json:"gpus,omitempty"`
	OneDNN   *bool    `json:"onednn,omitempty"`
}

// MeasuredNode is one node's measurement.
type MeasuredNode struct {
	Name        string  `json:"name"`
	Op          string  `json:"op,omitempty"`
	Device      string  `json:"device,omitempty"`
	ComputeNS   *int64  `json:"compute_ns"`
	OutputBytes []int64 `json:"output_bytes,omitempty"`

	devType string
}

// ParseMeasured parses a measured op profile (strictly; source names it in errors).
func ParseMeasured(data []byte, source string) (*Measured, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Measured
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: not a measured op profile: %v", source, jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the profile object", source)
	}
	if m.Format != MeasuredFormat {
		return nil, fmt.Errorf("%s: \"format\" must be %q, not %q", source, MeasuredFormat, m.Format)
	}
	if m.Version != MeasuredVersion {
		return nil, fmt.Errorf("%s: unsupported measured profile version %d (this tfswap reads version %d)", source, m.Version, MeasuredVersion)
	}
	if m.Device.Name == "" {
		return nil, fmt.Errorf("%s: missing device.name", source)
	}
	if _, err := graphdef.ParseDevice(m.Device.Name); err != nil {
		return nil, fmt.Errorf("%s: device.name: %v", source, err)
	}
	if m.Iterations < 1 {
		return nil, fmt.Errorf("%s: iterations must be at least 1, not %d", source, m.Iterations)
	}
	m.byName = make(map[string]*MeasuredNode, len(m.Nodes))
	var outTotal int64
	for i := range m.Nodes {
		nd := &m.Nodes[i]
		if nd.Name == "" {
			return nil, fmt.Errorf("%s: node #%d has no name", source, i)
		}
		if _, dup := m.byName[nd.Name]; dup {
			return nil, fmt.Errorf("%s: node %q is listed twice", source, nd.Name)
		}
		if nd.ComputeNS == nil {
			return nil, fmt.Errorf("%s: node %q: missing compute_ns", source, nd.Name)
		}
		if *nd.ComputeNS < 0 {
			return nil, fmt.Errorf("%s: node %q: compute_ns must not be negative", source, nd.Name)
		}
		if *nd.ComputeNS > MaxDuration {
			return nil, fmt.Errorf("%s: node %q: compute_ns must be at most %d (about 104 days), not %d", source, nd.Name, MaxDuration, *nd.ComputeNS)
		}
		for _, b := range nd.OutputBytes {
			if b < -1 || b > graphdef.MaxTensorBytes {
				return nil, fmt.Errorf("%s: node %q: output_bytes must be -1 (unknown) or between 0 and %d (1 PiB), not %d", source, nd.Name, graphdef.MaxTensorBytes, b)
			}
			if b > 0 {
				var ok bool
				if outTotal, ok = graphdef.AddBytes(outTotal, b, graphdef.MaxGraphBytes); !ok {
					return nil, fmt.Errorf("%s: node %q: the output_bytes of the profile add up to more than %d bytes (64 PiB)", source, nd.Name, graphdef.MaxGraphBytes)
				}
			}
		}
		dev := nd.Device
		if dev == "" {
			dev = m.Device.Name
		}
		d, err := graphdef.ParseDevice(dev)
		if err != nil {
			return nil, fmt.Errorf("%s: node %q: device: %v", source, nd.Name, err)
		}
		nd.devType = d.Type
		m.byName[nd.Name] = nd
	}
	return &m, nil
}

// LoadMeasured reads a measured op profile file.
func LoadMeasured(path string) (*Measured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read: %v", path, unwrapPath(err))
	}
	return ParseMeasured(data, path)
}

// Marshal writes m in the file format.
func (m *Measured) Marshal() ([]byte, error) {
	c := *m
	c.Format, c.Version = MeasuredFormat, MeasuredVersion
	data, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// lookup returns node n's measured time when it was measured on the same kind of device
// (GPU, CPU) as the one it is simulated on. A nil Measured has no entries.
func (m *Measured) lookup(n *graphdef.Node, simDevice string) (int64, bool) {
	ns, same, ok := m.lookupAny(n, simDevice, "")
	return ns, ok && same
}

// lookupAny returns node n's measured time, if it was measured, and whether it was measured
// on the kind of device it is simulated on (simDevice, simulated with the device profile
// named profile; "" skips the profile check): the same device type, and for GPUs the same
// profile when the measurement names one.
func (m *Measured) lookupAny(n *graphdef.Node, simDevice, profile string) (ns int64, same, ok bool) {
	if m == nil {
		return 0, false, false
	}
	nd, ok := m.byName[n.Name]
	if !ok {
		return 0, false, false
	}
	d, _ := graphdef.ParseDevice(simDevice)
	same = nd.devType == "" || d.Type == "" || nd.devType == d.Type
	if same && profile != "" && d.Type == "GPU" && m.Device.Profile != "" && m.Device.Profile != profile {
		same = false
	}
	return *nd.ComputeNS, same, true
}

// outputBytes returns the measured size of output port of n, if measured.
func (m *Measured) outputBytes(n *graphdef.Node, port int) (int64, bool) {
	if m == nil {
		return 0, false
	}
	nd, ok := m.byName[n.Name]
	if !ok || port >= len(nd.OutputBytes) || nd.OutputBytes[port] < 0 {
		return 0, false
	}
	return nd.OutputBytes[port], true
}
