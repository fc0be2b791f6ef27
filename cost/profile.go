package cost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// Profile describes one GPU model and its link to the host: what the simulator needs to time
// ops and transfers and to draw the memory budget. All rates are per second; sizes in bytes.
type Profile struct {
	// Name is the profile's name ("v100-16gb"); Description says what it is.
	Name        string
	Description string
	// MemoryBytes is the device's memory size (the budget line). TensorFlow can allocate
	// somewhat less: the CUDA context and the allocator's reserve take a few hundred MiB.
	MemoryBytes int64
	// FP32, TF32 and FP16 are peak dense throughputs in FLOP/s. FP16 is the tensor-core rate
	// where the GPU has tensor cores (used for half-precision matrix products and
	// convolutions). TF32 is 0 on GPUs without TF32 tensor cores; on those that have them,
	// TensorFlow runs float32 matrix products and convolutions in TF32 by default.
	FP32, TF32, FP16 float64
	// MemBandwidth is the device memory (HBM/GDDR) bandwidth in bytes/s.
	MemBandwidth float64
	// D2H and H2D are the effective host-link bandwidths in bytes/s, device-to-host and
	// host-to-device.
	D2H, H2D float64
	// Duplex says whether a device-to-host and a host-to-device copy can run at the same time
	// (two copy engines). When false both directions share one queue.
	Duplex bool
	// LaunchLatency is the fixed time added to every kernel-launching op, in seconds.
	LaunchLatency float64
	// TransferLatency is the fixed time added to every host transfer, in seconds.
	TransferLatency float64
	// HostFLOPS and HostMemBandwidth time ops that run on the host CPU.
	HostFLOPS, HostMemBandwidth float64
	// SMs is the number of streaming multiprocessors and ComputeCapability the CUDA compute
	// capability ("7.0"); the VirtualCluster checker builds Grappler's device from them.
	SMs               int
	ComputeCapability string
	// Link describes the host link ("PCIe 3.0 x16").
	Link string
	// TensorFlow is the TensorFlow release the graphs will run on, "MAJOR.MINOR" ("2.18");
	// it chooses the rule of the memory TensorFlow's GPU device keeps back (TFMemoryLimit).
	// Empty means TensorFlowVersion, the release tfswap is built against.
	TensorFlow string
	// Sources name the vendor documents (and any other source) the figures come from, and
	// how derived figures were derived.
	Sources []string
}

// Assumptions shared by the built-in profiles. They are not datasheet figures.
const (
	// pcieEfficiency is the fraction of a PCIe link's encoded per-direction rate a pinned
	// cudaMemcpy achieves: vDNN (Rhu et al., MICRO'16, section II-C) measured an average of
	// 12.8 GB/s on PCIe 3.0 x16, whose rate after 128b/130b encoding is 15.754 GB/s.
	pcieEfficiency = 12.8 / 15.754
	// linkEfficiency is used for NVLink and NVLink-C2C as well; no comparable published
	// measurement is cited, so the PCIe figure is reused (an assumption).
	linkEfficiency = pcieEfficiency
	// defaultLaunchLatency is the per-op launch overhead: CUDA kernel launch plus
	// TensorFlow's executor bookkeeping, a few microseconds (an assumption).
	defaultLaunchLatency = 5e-6
	// defaultTransferLatency is the fixed cost of one host transfer (cudaMemcpyAsync plus
	// TensorFlow's rendezvous), an assumption.
	defaultTransferLatency = 10e-6
	// defaultHostFLOPS and defaultHostMemBandwidth time ops placed on the host (a
	// server CPU socket, an assumption); tfswap's own swap nodes move no data on the host.
	defaultHostFLOPS        = 1e12
	defaultHostMemBandwidth = 50e9
)

// pcieRate returns a PCIe x16 link's per-direction rate in bytes/s after line encoding:
// transfers/s x 16 lanes x encoding efficiency / 8 bits.
func pcieRate(gigaTransfers float64, encoding float64) float64 {
	return gigaTransfers * 1e9 * 16 * encoding / 8
}

var (
	pcie3 = pcieRate(8, 128.0/130) * pcieEfficiency  // 12.8 GB/s
	pcie4 = pcieRate(16, 128.0/130) * pcieEfficiency // 25.6 GB/s
	pcie5 = pcieRate(32, 128.0/130) * pcieEfficiency // 51.2 GB/s
	// nvlink2x2 is two NVLink 2.0 bricks between a POWER9 CPU and a V100 (the machine of the
	// out-of-core paper, section 4: "two NVLinks (each can transfer memory at 50GB/s)",
	// i.e. 25 GB/s per direction each).
	nvlink2x2 = 2 * 25e9 * linkEfficiency
	// c2c is NVLink-C2C, 900 GB/s total, 450 GB/s per direction (NVIDIA GH200 datasheet).
	c2c = 450e9 * linkEfficiency
)

const gib = 1 << 30

const (
	srcPCIe3 = "host link: PCIe 3.0 x16, 8 GT/s x 16 lanes x 128/130 / 8 = 15.75 GB/s per direction, x 0.8125 (vDNN's measured 12.8 GB/s cudaMemcpy average on PCIe 3.0 x16, Rhu et al. MICRO'16 sec. II-C) = 12.8 GB/s effective each way"
	srcPCIe4 = "host link: PCIe 4.0 x16, 31.5 GB/s per direction after encoding, x 0.8125 (the PCIe 3.0 efficiency vDNN measured, assumed to carry over) = 25.6 GB/s effective each way"
	srcPCIe5 = "host link: PCIe 5.0 x16, 63.0 GB/s per direction after encoding, x 0.8125 (the PCIe 3.0 efficiency vDNN measured, assumed to carry over) = 51.2 GB/s effective each way"
	srcNVL2  = "host link: 2 NVLink 2.0 bricks to a POWER9 host (IBM AC922 6-GPU configuration; the out-of-core paper's machine: 'two NVLinks (each can transfer memory at 50GB/s)'), 50 GB/s per direction, x 0.8125 (assumed) = 40.6 GB/s effective each way"
	srcC2C   = "host link: NVLink-C2C 900 GB/s total = 450 GB/s per direction (NVIDIA GH200 Grace Hopper Superchip datasheet), x 0.8125 (assumed) = 366 GB/s effective each way"
	srcLat   = "launch latency 5 us and transfer latency 10 us are assumptions (not vendor figures); override them with --device-file"
)

// builtin holds the built-in profiles by name.
var builtin = map[string]*Profile{}

// aliases maps alternative names to built-in profile names.
var aliases = map[string]string{
	"1080ti": "gtx1080ti", "gtx-1080-ti": "gtx1080ti", "gtx1080-ti": "gtx1080ti",
	"titanx-maxwell": "titanx", "titan-x": "titanx",
	"v100": "v100-16gb", "v100-pcie": "v100-16gb", "v100-16gb-pcie": "v100-16gb", "v100-32gb-pcie": "v100-32gb",
	"a100":      "a100-40gb",
	"h100-80gb": "h100", "h100-sxm": "h100",
	"gh200-96gb": "gh200",
}

func addBuiltin(p *Profile) {
	if p.LaunchLatency == 0 {
		p.LaunchLatency = defaultLaunchLatency
	}
	if p.TransferLatency == 0 {
		p.TransferLatency = defaultTransferLatency
	}
	if p.HostFLOPS == 0 {
		p.HostFLOPS = defaultHostFLOPS
	}
	if p.HostMemBandwidth == 0 {
		p.HostMemBandwidth = defaultHostMemBandwidth
	}
	p.Duplex = true
	p.Sources = append(p.Sources, srcLat)
	if err := p.Validate(); err != nil {
		panic("cost: built-in profile " + p.Name + ": " + err.Error())
	}
	builtin[p.Name] = p
}

func init() {
	addBuiltin(&Profile{
		Name:         "gtx1080ti",
		Description:  "NVIDIA GeForce GTX 1080 Ti (Pascal GP102), 11 GB GDDR5X, PCIe 3.0 x16",
		MemoryBytes:  11 * gib,
		FP32:         3584 * 2 * 1582e6, // 11.34 TFLOP/s
		FP16:         3584 * 2 * 1582e6 / 64,
		MemBandwidth: 484e9,
		D2H:          pcie3, H2D: pcie3,
		SMs: 28, ComputeCapability: "6.1", Link: "PCIe 3.0 x16",
		Sources: []string{
			"NVIDIA GeForce GTX 1080 Ti product specifications: 3584 CUDA cores, 1582 MHz boost, 11 GB GDDR5X at 11 Gbps on a 352-bit bus = 484 GB/s",
			"FP32 = 3584 cores x 2 FLOP/FMA x 1.582 GHz = 11.34 TFLOP/s; FP16 runs at 1/64 of FP32 on GP102 (NVIDIA Pascal tuning guide); 28 SMs, compute capability 6.1",
			srcPCIe3,
		},
	})
	addBuiltin(&Profile{
		Name:         "titanx",
		Description:  "NVIDIA GeForce GTX TITAN X (Maxwell GM200), 12 GB GDDR5, PCIe 3.0 x16 (vDNN's GPU)",
		MemoryBytes:  12 * gib,
		FP32:         3072 * 2 * 1075e6, // 6.6 TFLOP/s
		FP16:         3072 * 2 * 1075e6,
		MemBandwidth: 336.5e9,
		D2H:          pcie3, H2D: pcie3,
		SMs: 24, ComputeCapability: "5.2", Link: "PCIe 3.0 x16",
		Sources: []string{
			"NVIDIA GeForce GTX TITAN X specifications: 3072 CUDA cores, 1075 MHz boost, 12 GB GDDR5 at 7 Gbps on a 384-bit bus = 336.5 GB/s (vDNN sec. IV: '7 TFLOPS', '336 GB/sec', '12 GB')",
			"FP32 = 3072 x 2 x 1.075 GHz = 6.6 TFLOP/s; GM200 has no double-rate FP16 arithmetic, so FP16 = FP32; 24 SMs, compute capability 5.2",
			srcPCIe3,
		},
	})
	v100 := func(name string, memGiB int64, sxm bool) *Profile {
		p := &Profile{
			Name:         name,
			MemoryBytes:  memGiB * gib,
			MemBandwidth: 900e9,
			SMs:          80, ComputeCapability: "7.0",
		}
		if sxm {
			p.Description = fmt.Sprintf("NVIDIA Tesla V100 SXM2 %d GB on a POWER9 host with NVLink 2.0 to the CPU", memGiB)
			p.FP32, p.FP16 = 15.7e12, 125e12
			p.D2H, p.H2D = nvlink2x2, nvlink2x2
			p.Link = "NVLink 2.0 x2 (POWER9)"
			p.Sources = []string{
				"NVIDIA Tesla V100 GPU Accelerator datasheet (V100 SXM2): FP32 15.7 TFLOPS, Tensor Performance 125 TFLOPS, HBM2 16/32 GB at 900 GB/s; 80 SMs, compute capability 7.0",
				srcNVL2,
			}
		} else {
			p.Description = fmt.Sprintf("NVIDIA Tesla V100 PCIe %d GB, PCIe 3.0 x16", memGiB)
			p.FP32, p.FP16 = 14e12, 112e12
			p.D2H, p.H2D = pcie3, pcie3
			p.Link = "PCIe 3.0 x16"
			p.Sources = []string{
				"NVIDIA Tesla V100 GPU Accelerator datasheet (V100 PCIe): FP32 14 TFLOPS, Tensor Performance 112 TFLOPS, HBM2 16/32 GB at 900 GB/s, PCIe 32 GB/s bidirectional; 80 SMs, compute capability 7.0",
				srcPCIe3,
			}
		}
		return p
	}
	addBuiltin(v100("v100-16gb", 16, false))
	addBuiltin(v100("v100-32gb", 32, false))
	addBuiltin(v100("v100-16gb-nvlink", 16, true))
	addBuiltin(v100("v100-32gb-nvlink", 32, true))
	a100 := func(name string, memGiB int64, bw float64) *Profile {
		return &Profile{
			Name:        name,
			Description: fmt.Sprintf("NVIDIA A100 SXM4 %d GB, PCIe 4.0 x16 to the host", memGiB),
			MemoryBytes: memGiB * gib,
			FP32:        19.5e12, TF32: 156e12, FP16: 312e12,
			MemBandwidth: bw,
			D2H:          pcie4, H2D: pcie4,
			SMs: 108, ComputeCapability: "8.0", Link: "PCIe 4.0 x16",
			Sources: []string{
				fmt.Sprintf("NVIDIA A100 Tensor Core GPU datasheet (A100 %dGB SXM): FP32 19.5 TFLOPS, TF32 Tensor Core 156 TFLOPS, FP16 Tensor Core 312 TFLOPS (dense; the datasheet's doubled figures are with sparsity), GPU memory bandwidth %.0f GB/s, PCIe Gen4 64 GB/s bidirectional; 108 SMs, compute capability 8.0", memGiB, bw/1e9),
				srcPCIe4,
			},
		}
	}
	addBuiltin(a100("a100-40gb", 40, 1555e9))
	addBuiltin(a100("a100-80gb", 80, 2039e9))
	addBuiltin(&Profile{
		Name:        "h100",
		Description: "NVIDIA H100 SXM5 80 GB, PCIe 5.0 x16 to the host",
		MemoryBytes: 80 * gib,
		FP32:        67e12, TF32: 989e12 / 2, FP16: 1979e12 / 2,
		MemBandwidth: 3.35e12,
		D2H:          pcie5, H2D: pcie5,
		SMs: 132, ComputeCapability: "9.0", Link: "PCIe 5.0 x16",
		Sources: []string{
			"NVIDIA H100 Tensor Core GPU datasheet (H100 SXM): FP32 67 TFLOPS, TF32 Tensor Core 989 TFLOPS and FP16 Tensor Core 1,979 TFLOPS with sparsity (halved here for dense math), 80 GB HBM3 at 3.35 TB/s, PCIe Gen5 128 GB/s bidirectional; 132 SMs, compute capability 9.0",
			srcPCIe5,
		},
	})
	addBuiltin(&Profile{
		Name:        "gh200",
		Description: "NVIDIA GH200 Grace Hopper Superchip (H100 GPU, 96 GB HBM3), NVLink-C2C to the Grace CPU",
		MemoryBytes: 96 * gib,
		FP32:        67e12, TF32: 989e12 / 2, FP16: 1979e12 / 2,
		MemBandwidth: 4e12,
		D2H:          c2c, H2D: c2c,
		SMs: 132, ComputeCapability: "9.0", Link: "NVLink-C2C",
		Sources: []string{
			"NVIDIA GH200 Grace Hopper Superchip datasheet: 96 GB HBM3 at 4 TB/s, FP32 67 TFLOPS, TF32 989 and FP16 1,979 TFLOPS with sparsity (halved here for dense math), NVLink-C2C 900 GB/s; 132 SMs, compute capability 9.0",
			srcC2C,
		},
	})
}

// Profiles returns copies of the built-in profiles, sorted by name.
func Profiles() []*Profile {
	names := make([]string, 0, len(builtin))
	for n := range builtin {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*Profile, len(names))
	for i, n := range names {
		out[i] = builtin[n].Clone()
	}
	return out
}

// ProfileNames returns the built-in profile names, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(builtin))
	for n := range builtin {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupProfile returns a copy of the built-in profile with the given name or alias
// (case-insensitive).
func LookupProfile(name string) (*Profile, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[key]; ok {
		key = a
	}
	if p, ok := builtin[key]; ok {
		return p.Clone(), nil
	}
	return nil, fmt.Errorf("unknown device profile %q (built-in profiles: %s; or give your own with --device-file)", name, strings.Join(ProfileNames(), ", "))
}

// Clone returns a deep copy of p.
func (p *Profile) Clone() *Profile {
	q := *p
	q.Sources = append([]string(nil), p.Sources...)
	return &q
}

// Validate checks that every figure is usable.
func (p *Profile) Validate() error {
	var errs []string
	pos := func(name string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Sprintf("%s must be a positive number, not %v", name, v))
		}
	}
	nonneg := func(name string, v float64) {
		if !(v >= 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Sprintf("%s must be zero or positive, not %v", name, v))
		}
	}
	if strings.TrimSpace(p.Name) == "" {
		errs = append(errs, "name is empty")
	}
	if p.MemoryBytes <= 0 {
		errs = append(errs, fmt.Sprintf("memory_bytes must be positive, not %d", p.MemoryBytes))
	}
	pos("fp32_flops", p.FP32)
	nonneg("tf32_flops", p.TF32)
	pos("fp16_flops", p.FP16)
	pos("mem_bytes_per_s", p.MemBandwidth)
	pos("d2h_bytes_per_s", p.D2H)
	pos("h2d_bytes_per_s", p.H2D)
	nonneg("launch_latency_s", p.LaunchLatency)
	nonneg("transfer_latency_s", p.TransferLatency)
	pos("host_flops", p.HostFLOPS)
	pos("host_mem_bytes_per_s", p.HostMemBandwidth)
	if p.SMs < 0 {
		errs = append(errs, fmt.Sprintf("sms must not be negative, not %d", p.SMs))
	}
	if p.ComputeCapability != "" {
		var maj, min int
		if n, err := fmt.Sscanf(p.ComputeCapability, "%d.%d", &maj, &min); n != 2 || err != nil || maj < 1 {
			errs = append(errs, fmt.Sprintf("compute_capability must look like \"7.0\", not %q", p.ComputeCapability))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// ProfileFormat and ProfileVersion identify a device profile file.
const (
	ProfileFormat  = "tfswap-device-profile"
	ProfileVersion = 1
)

// profileFile is the JSON form of a device profile (the --device-file format). Optional
// fields are pointers so that a missing field can be told from a zero.
type profileFile struct {
	Format            string   `json:"format"`
	Version           int      `json:"version"`
	Name              string   `json:"name"`
	Description       string   `json:"description,omitempty"`
	MemoryBytes       *int64   `json:"memory_bytes"`
	FP32              *float64 `json:"fp32_flops"`
	TF32              *float64 `json:"tf32_flops,omitempty"`
	FP16              *float64 `json:"fp16_flops,omitempty"`
	MemBandwidth      *float64 `json:"mem_bytes_per_s"`
	D2H               *float64 `json:"d2h_bytes_per_s"`
	H2D               *float64 `json:"h2d_bytes_per_s"`
	Duplex            *bool    `json:"duplex_copy,omitempty"`
	LaunchLatency     *float64 `json:"launch_latency_s,omitempty"`
	TransferLatency   *float64 `json:"transfer_latency_s,omitempty"`
	HostFLOPS         *float64 `json:"host_flops,omitempty"`
	HostMemBandwidth  *float64 `json:"host_mem_bytes_per_s,omitempty"`
	SMs               *int     `json:"sms,omitempty"`
	ComputeCapability string   `json:"compute_capability,omitempty"`
	Link              string   `json:"link,omitempty"`
	TensorFlow        string   `json:"tensorflow,omitempty"`
	Sources           []string `json:"sources,omitempty"`
}

// ParseProfile parses a device profile file (see docs/SIMULATOR.md, "Device profile files").
// Parsing is strict: unknown fields, a wrong format or version, missing required fields and
// values out of range are errors that name the field. source names the file in errors.
func ParseProfile(data []byte, source string) (*Profile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f profileFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: not a device profile: %v", source, jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the profile object", source)
	}
	if f.Format != ProfileFormat {
		return nil, fmt.Errorf("%s: \"format\" must be %q, not %q", source, ProfileFormat, f.Format)
	}
	if f.Version != ProfileVersion {
		return nil, fmt.Errorf("%s: unsupported profile version %d (this tfswap reads version %d)", source, f.Version, ProfileVersion)
	}
	var missing []string
	req := func(name string, ok bool) {
		if !ok {
			missing = append(missing, name)
		}
	}
	req("name", f.Name != "")
	req("memory_bytes", f.MemoryBytes != nil)
	req("fp32_flops", f.FP32 != nil)
	req("mem_bytes_per_s", f.MemBandwidth != nil)
	req("d2h_bytes_per_s", f.D2H != nil)
	req("h2d_bytes_per_s", f.H2D != nil)
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: missing required field(s): %s", source, strings.Join(missing, ", "))
	}
	p := &Profile{
		Name: f.Name, Description: f.Description, MemoryBytes: *f.MemoryBytes,
		FP32: *f.FP32, FP16: *f.FP32, MemBandwidth: *f.MemBandwidth, D2H: *f.D2H, H2D: *f.H2D,
		Duplex: true, LaunchLatency: defaultLaunchLatency, TransferLatency: defaultTransferLatency,
		HostFLOPS: defaultHostFLOPS, HostMemBandwidth: defaultHostMemBandwidth,
		ComputeCapability: f.ComputeCapability, Link: f.Link, Sources: f.Sources, TensorFlow: f.TensorFlow,
	}
	if f.TensorFlow != "" {
		if _, _, err := parseTFVersion(f.TensorFlow); err != nil {
			return nil, fmt.Errorf("%s: field \"tensorflow\": %v", source, err)
		}
	}
	if f.TF32 != nil {
		p.TF32 = *f.TF32
	}
	if f.FP16 != nil {
		p.FP16 = *f.FP16
	}
	if f.Duplex != nil {
		p.Duplex = *f.Duplex
	}
	if f.LaunchLatency != nil {
		p.LaunchLatency = *f.LaunchLatency
	}
	if f.TransferLatency != nil {
		p.TransferLatency = *f.TransferLatency
	}
	if f.HostFLOPS != nil {
		p.HostFLOPS = *f.HostFLOPS
	}
	if f.HostMemBandwidth != nil {
		p.HostMemBandwidth = *f.HostMemBandwidth
	}
	if f.SMs != nil {
		p.SMs = *f.SMs
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	return p, nil
}

// LoadProfileFile reads a device profile file.
func LoadProfileFile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read: %v", path, unwrapPath(err))
	}
	return ParseProfile(data, path)
}

// MarshalProfile writes p in the device profile file format.
func MarshalProfile(p *Profile) ([]byte, error) {
	f := profileFile{
		Format: ProfileFormat, Version: ProfileVersion, Name: p.Name, Description: p.Description,
		MemoryBytes: &p.MemoryBytes, FP32: &p.FP32, TF32: &p.TF32, FP16: &p.FP16,
		MemBandwidth: &p.MemBandwidth, D2H: &p.D2H, H2D: &p.H2D, Duplex: &p.Duplex,
		LaunchLatency: &p.LaunchLatency, TransferLatency: &p.TransferLatency,
		HostFLOPS: &p.HostFLOPS, HostMemBandwidth: &p.HostMemBandwidth,
		ComputeCapability: p.ComputeCapability, Link: p.Link, Sources: p.Sources, TensorFlow: p.TensorFlow,
	}
	if p.SMs > 0 {
		f.SMs = &p.SMs
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// jsonErr makes encoding/json's errors say which field is at fault.
func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q: %s is not a %s", te.Field, te.Value, te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, err)
	}
	return err.Error()
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
