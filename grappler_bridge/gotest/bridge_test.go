//go:build tensorflow

package gotest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	tf "github.com/wamuir/graft/tensorflow"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	cpb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
	"google.golang.org/protobuf/proto"
)

const (
	host   = "/job:localhost/replica:0/task:0/device:CPU:0"
	device = "/job:localhost/replica:0/task:0/device:CPU:1"
	steps  = 5
	// childEnv marks the child process of TestBadParameterWarnsOnceInGo.
	childEnv = "TFSWAP_BRIDGE_GOTEST_CHILD"
)

var (
	warningRE     = regexp.MustCompile(`(?m)^\S+ \S+: W \S+\] TFSwapOptimizer: (.*)$`)
	partitionerRE = regexp.MustCompile(`/_\d+$`) // nodes graph partitioning adds
)

// ---------------------------------------------------------------------------------------
// Tools: tfswap and the bridge, built once per test binary.

var (
	toolsOnce             sync.Once
	toolsErr              error
	rootDir, tfswapBinary string
	libraryPath, buildDir string
)

func tools(t *testing.T) (tfswap, library string) {
	t.Helper()
	toolsOnce.Do(func() {
		rootDir, toolsErr = filepath.Abs(filepath.Join("..", ".."))
		if toolsErr != nil {
			return
		}
		buildDir, toolsErr = os.MkdirTemp("", "tfswap-gotest-")
		if toolsErr != nil {
			return
		}
		tfswapBinary = filepath.Join(buildDir, "tfswap")
		cmd := exec.Command("go", "build", "-o", tfswapBinary, "./cmd/tfswap")
		cmd.Dir = rootDir
		if out, err := cmd.CombinedOutput(); err != nil {
			toolsErr = fmt.Errorf("go build tfswap: %v\n%s", err, out)
			return
		}
		cmd = exec.Command(filepath.Join(rootDir, "grappler_bridge", "build.sh"))
		if out, err := cmd.CombinedOutput(); err != nil {
			toolsErr = fmt.Errorf("grappler_bridge/build.sh: %v\n%s", err, out)
			return
		}
		libraryPath = filepath.Join(rootDir, "grappler_bridge", "libtfswap_grappler.so")
		toolsErr = LoadLibrary(libraryPath)
	})
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	return tfswapBinary, libraryPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// ---------------------------------------------------------------------------------------
// The residual-network fixture on the two-device emulation.

type fixture struct {
	Feeds []struct {
		Name  string  `json:"name"`
		File  string  `json:"file"`
		Shape []int64 `json:"shape"`
	} `json:"feeds"`
	Loss      string `json:"loss"`
	TrainOp   string `json:"train_op"`
	InitOp    string `json:"init_op"`
	Variables []struct {
		Name  string `json:"name"`
		Fetch string `json:"fetch"`
	} `json:"variables"`
}

func fixtureDir() string { return filepath.Join(rootDir, "testmodels", "fixtures") }

func loadFixture(t *testing.T) (*fixture, map[string]*Tensor) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir(), "resnet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	feeds := map[string]*Tensor{}
	for _, f := range fx.Feeds {
		tensor, err := readNpy(filepath.Join(fixtureDir(), f.File))
		if err != nil {
			t.Fatal(err)
		}
		feeds[f.Name] = tensor
	}
	return &fx, feeds
}

// placedGraph returns the fixture GraphDef with every node on /device:CPU:1, the emulated
// GPU.
func placedGraph(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir(), "resnet.pb"))
	if err != nil {
		t.Fatal(err)
	}
	var gd gpb.GraphDef
	if err := proto.Unmarshal(data, &gd); err != nil {
		t.Fatal(err)
	}
	for _, n := range gd.Node {
		n.Device = "/device:CPU:1"
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(&gd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sessionConfig is the two-device emulation with fixed thread pools; with params the bridge
// is on, after the default Grappler passes (which stay on).
func sessionConfig(t *testing.T, params map[string]string) []byte {
	t.Helper()
	c := &cpb.ConfigProto{
		DeviceCount:               map[string]int32{"CPU": 2},
		IntraOpParallelismThreads: 2,
		InterOpParallelismThreads: 2,
	}
	if params != nil {
		opt := &cpb.RewriterConfig_CustomGraphOptimizer{Name: "TFSwapOptimizer", ParameterMap: map[string]*apb.AttrValue{}}
		for k, v := range params {
			opt.ParameterMap[k] = &apb.AttrValue{Value: &apb.AttrValue_S{S: []byte(v)}}
		}
		c.GraphOptions = &cpb.GraphOptions{RewriteOptions: &cpb.RewriterConfig{
			CustomOptimizers: []*cpb.RewriterConfig_CustomGraphOptimizer{opt},
		}}
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type trainResult struct {
	losses, variables [][]byte
	meta              *cpb.RunMetadata // of the last, traced step
}

func (r *trainResult) digest() string {
	h := sha256.New()
	for _, b := range append(append([][]byte{}, r.losses...), r.variables...) {
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func train(t *testing.T, graphDef, config []byte) *trainResult {
	t.Helper()
	fx, feeds := loadFixture(t)
	s, err := NewSession(graphDef, config)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Run(nil, nil, []string{fx.InitOp}, nil); err != nil {
		t.Fatal(err)
	}
	trace, err := proto.Marshal(&cpb.RunOptions{TraceLevel: cpb.RunOptions_FULL_TRACE, OutputPartitionGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &trainResult{}
	for step := 0; step < steps; step++ {
		var opts []byte
		if step == steps-1 {
			opts = trace
		}
		out, md, err := s.Run(feeds, []string{fx.Loss}, []string{fx.TrainOp}, opts)
		if err != nil {
			t.Fatal(err)
		}
		r.losses = append(r.losses, out[0].Data)
		if md != nil {
			r.meta = &cpb.RunMetadata{}
			if err := proto.Unmarshal(md, r.meta); err != nil {
				t.Fatal(err)
			}
		}
	}
	var fetches []string
	for _, v := range fx.Variables {
		fetches = append(fetches, v.Fetch)
	}
	vars, _, err := s.Run(nil, fetches, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vars {
		r.variables = append(r.variables, v.Data)
	}
	return r
}

// ---------------------------------------------------------------------------------------
// Partition graphs

type partitions struct {
	nodes      map[string]*npb.NodeDef
	send, recv map[string]*npb.NodeDef // by rendezvous key
	readers    map[string][]*npb.NodeDef
}

func newPartitions(md *cpb.RunMetadata) *partitions {
	p := &partitions{nodes: map[string]*npb.NodeDef{}, send: map[string]*npb.NodeDef{},
		recv: map[string]*npb.NodeDef{}, readers: map[string][]*npb.NodeDef{}}
	for _, g := range md.PartitionGraphs {
		for _, n := range g.Node {
			p.nodes[n.Name] = n
			switch n.Op {
			case "_Send", "_HostSend":
				p.send[string(n.Attr["tensor_name"].GetS())] = n
			case "_Recv", "_HostRecv":
				p.recv[string(n.Attr["tensor_name"].GetS())] = n
			}
			for _, in := range n.Input {
				if !strings.HasPrefix(in, "^") {
					p.readers[nodeName(in)] = append(p.readers[nodeName(in)], n)
				}
			}
		}
	}
	return p
}

func nodeName(in string) string {
	in = strings.TrimPrefix(in, "^")
	if i := strings.IndexByte(in, ':'); i >= 0 {
		return in[:i]
	}
	return in
}

func (p *partitions) swapNodes(role string) []*npb.NodeDef {
	var out []*npb.NodeDef
	for _, n := range p.nodes {
		if r, ok := n.Attr["_tfswap_role"]; ok && (role == "" || string(r.GetS()) == role) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// origin follows the nodes partitioning added (a _Recv to its _Send, a _Send, control-edge
// Identity or dummy Const to its one input) back to the original node.
func (p *partitions) origin(name string) *npb.NodeDef {
	n := p.nodes[nodeName(name)]
	for i := 0; i < 16 && n != nil; i++ {
		if !partitionerRE.MatchString(n.Name) {
			return n
		}
		if n.Op == "_Recv" || n.Op == "_HostRecv" {
			n = p.send[string(n.Attr["tensor_name"].GetS())]
		} else if len(n.Input) == 1 {
			n = p.nodes[nodeName(n.Input[0])]
		} else {
			return nil
		}
	}
	return nil
}

// ---------------------------------------------------------------------------------------
// Tests

func TestBridgeInGoSession(t *testing.T) {
	tfswap, _ := tools(t)
	graph := placedGraph(t)
	base := train(t, graph, sessionConfig(t, nil))
	// LMS's fixed thresholds: the fixture fits any GPU's default budget, so tfswap's default
	// plan would leave it unchanged.
	swapped := train(t, graph, sessionConfig(t, map[string]string{
		"tfswap_binary": tfswap, "compute_device": "/device:CPU:1", "min_bytes": "0", "strategy": "lms-fixed",
	}))

	// Bit-identical training.
	for i := range base.losses {
		if !bytes.Equal(base.losses[i], swapped.losses[i]) {
			t.Errorf("loss differs at step %d", i)
		}
	}
	for i := range base.variables {
		if !bytes.Equal(base.variables[i], swapped.variables[i]) {
			t.Errorf("variable %d differs after %d steps", i, steps)
		}
	}

	// The swap nodes run on the host, each swap-in sends its copy back to the device.
	p := newPartitions(swapped.meta)
	outs, ins := p.swapNodes("swap_out"), p.swapNodes("swap_in")
	if len(outs) < 10 || len(ins) < len(outs) {
		t.Fatalf("partition graphs hold %d swap-outs and %d swap-ins", len(outs), len(ins))
	}
	for _, n := range append(append([]*npb.NodeDef{}, outs...), ins...) {
		if n.Device != host || n.Op != "Identity" || !n.Attr["_grappler_do_not_remove"].GetB() {
			t.Errorf("swap node %s: op %s on %s", n.Name, n.Op, n.Device)
		}
	}
	for _, n := range outs {
		in := p.nodes[nodeName(n.Input[0])]
		if in.Op == "_Arg" { // a fed placeholder arrives on the host
			continue
		}
		if send := p.send[string(in.Attr["tensor_name"].GetS())]; in.Device != host || send == nil || send.Device != device {
			t.Errorf("swap-out %s does not read a tensor sent from the device", n.Name)
		}
	}

	// Trigger order: each swap-in starts after its trigger's kernel ended on the device
	// (StepStats has no entries for _Send/_Recv; the _Send reads the swap-in's output).
	start, end := map[string]int64{}, map[string]int64{}
	for _, dev := range swapped.meta.StepStats.DevStats {
		for _, ns := range dev.NodeStats {
			start[ns.NodeName] = ns.AllStartNanos
			end[ns.NodeName] = ns.AllStartNanos + ns.OpEndRelNanos
		}
	}
	for _, n := range ins {
		var ctrl []string
		for _, in := range n.Input {
			if strings.HasPrefix(in, "^") {
				ctrl = append(ctrl, in)
			}
		}
		if len(ctrl) != 1 {
			t.Errorf("swap-in %s has control inputs %v", n.Name, ctrl)
			continue
		}
		// The control edge comes from the trigger or from tfswap's gate (an Identity of the
		// trigger's output on the device); check the swap-in starts after both.
		gate := p.origin(ctrl[0])
		if gate == nil || gate.Device != device {
			t.Errorf("swap-in %s: no trigger on the device behind %s", n.Name, ctrl[0])
			continue
		}
		chain := []*npb.NodeDef{gate}
		if string(gate.Attr["_tfswap_role"].GetS()) == "gate" {
			if trig := p.origin(gate.Input[0]); trig != nil && trig.Device == device &&
				!strings.HasPrefix(trig.Name, "tfswap/") {
				chain = append(chain, trig)
			} else {
				t.Errorf("gate %s: no trigger on the device behind %s", gate.Name, gate.Input[0])
				continue
			}
		}
		sent := false
		for _, r := range p.readers[n.Name] {
			sent = sent || ((r.Op == "_Send" || r.Op == "_HostSend") && r.Device == host)
		}
		if !sent {
			t.Errorf("swap-in %s is not sent to the device", n.Name)
		}
		for _, trig := range chain {
			s, ok1 := start[n.Name]
			e, ok2 := end[trig.Name]
			if !ok1 || !ok2 {
				t.Errorf("no step stats for %s or %s", n.Name, trig.Name)
			} else if s < e {
				t.Errorf("swap-in %s started %d ns before %s finished", n.Name, e-s, trig.Name)
			}
		}
	}
}

// TestBadParameterWarnsOnceInGo runs itself in a child process with TensorFlow's log on: a
// parameter tfswap cannot parse must leave the graphs unchanged, log exactly one warning,
// and the session must train as without the bridge.
func TestBadParameterWarnsOnceInGo(t *testing.T) {
	tfswap, _ := tools(t)
	graph := placedGraph(t)
	params := map[string]string{"tfswap_binary": tfswap, "compute_device": "/device:CPU:1", "min_bytes": "banana"}
	if os.Getenv(childEnv) == "1" {
		r := train(t, graph, sessionConfig(t, params))
		fmt.Printf("GOTEST-RESULT %s %d\n", r.digest(), len(newPartitions(r.meta).swapNodes("")))
		return
	}
	base := train(t, graph, sessionConfig(t, nil))
	cmd := exec.Command(os.Args[0], "-test.run=^TestBadParameterWarnsOnceInGo$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", "TF_CPP_MIN_LOG_LEVEL=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	m := regexp.MustCompile(`GOTEST-RESULT (\S+) (\d+)`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("child printed no result:\n%s", stdout.String())
	}
	if m[1] != base.digest() {
		t.Error("training with a bad parameter differs from training without the bridge")
	}
	if n, _ := strconv.Atoi(m[2]); n != 0 {
		t.Errorf("%d swap nodes in the partition graphs; want none", n)
	}
	warnings := warningRE.FindAllStringSubmatch(stderr.String(), -1)
	if len(warnings) != 1 || !strings.Contains(warnings[0][1], "--min-bytes") ||
		!strings.Contains(warnings[0][1], "unchanged") {
		t.Errorf("want one warning about --min-bytes, got %q", warnings)
	}
}

// TestGraftExample runs the README's Go example: the graft bindings load the library and
// pass the ConfigProto in SessionOptions.Config.
func TestGraftExample(t *testing.T) {
	tfswap, library := tools(t)
	graph := placedGraph(t)
	fx, feeds := loadFixture(t)

	run := func(config []byte) [][]byte {
		// --- as in grappler_bridge/README.md ---
		if _, err := tf.LoadLibrary(library); err != nil {
			t.Fatal(err)
		}
		g := tf.NewGraph()
		if err := g.Import(graph, ""); err != nil {
			t.Fatal(err)
		}
		sess, err := tf.NewSession(g, &tf.SessionOptions{Config: config})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		// ---
		if _, err := sess.Run(nil, nil, []*tf.Operation{g.Operation(fx.InitOp)}); err != nil {
			t.Fatal(err)
		}
		in := map[tf.Output]*tf.Tensor{}
		for name, v := range feeds {
			op, port := name, 0
			if i := strings.LastIndexByte(name, ':'); i >= 0 {
				op = name[:i]
				port, _ = strconv.Atoi(name[i+1:])
			}
			tensor, err := tf.ReadTensor(tf.DataType(v.DType), v.Shape, bytes.NewReader(v.Data))
			if err != nil {
				t.Fatal(err)
			}
			in[g.Operation(op).Output(port)] = tensor
		}
		loss := g.Operation(strings.TrimSuffix(fx.Loss, ":0")).Output(0)
		var losses [][]byte
		for i := 0; i < steps; i++ {
			out, err := sess.Run(in, []tf.Output{loss}, []*tf.Operation{g.Operation(fx.TrainOp)})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if _, err := out[0].WriteContentsTo(&b); err != nil {
				t.Fatal(err)
			}
			losses = append(losses, b.Bytes())
		}
		return losses
	}
	base := run(sessionConfig(t, nil))
	// graft cannot return RunMetadata: tfswap's --report (a passed-through parameter) shows
	// that the bridge ran inside this Go process.
	report := filepath.Join(t.TempDir(), "report.json")
	swapped := run(sessionConfig(t, map[string]string{
		"tfswap_binary": tfswap, "compute_device": "/device:CPU:1", "min_bytes": "0",
		"strategy": "lms-fixed", "report": report,
	}))
	var rep struct {
		Swaps []json.RawMessage `json:"swaps"`
	}
	if data, err := os.ReadFile(report); err != nil {
		t.Errorf("tfswap never ran: %v", err)
	} else if err := json.Unmarshal(data, &rep); err != nil {
		t.Errorf("report: %v", err)
	}
	for i := range base {
		if !bytes.Equal(base[i], swapped[i]) {
			t.Errorf("loss differs at step %d", i)
		}
	}
}

// ---------------------------------------------------------------------------------------
// .npy files (version 1 and 2, little-endian float32 and int32, C order)

func readNpy(path string) (*Tensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < 10 || string(data[:6]) != "\x93NUMPY" {
		return nil, fmt.Errorf("%s: not a .npy file", path)
	}
	var hlen, off int
	if data[6] == 1 {
		hlen, off = int(binary.LittleEndian.Uint16(data[8:10])), 10
	} else {
		hlen, off = int(binary.LittleEndian.Uint32(data[8:12])), 12
	}
	header := string(data[off : off+hlen])
	descr := regexp.MustCompile(`'descr':\s*'([^']*)'`).FindStringSubmatch(header)
	shape := regexp.MustCompile(`'shape':\s*\(([^)]*)\)`).FindStringSubmatch(header)
	if descr == nil || shape == nil || strings.Contains(header, "'fortran_order': True") {
		return nil, fmt.Errorf("%s: unsupported header %q", path, header)
	}
	t := &Tensor{Data: data[off+hlen:]}
	switch descr[1] {
	case "<f4":
		t.DType = int(tf.Float)
	case "<i4":
		t.DType = int(tf.Int32)
	default:
		return nil, fmt.Errorf("%s: unsupported dtype %s", path, descr[1])
	}
	for _, d := range strings.Split(shape[1], ",") {
		if d = strings.TrimSpace(d); d != "" {
			n, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: shape %q", path, shape[1])
			}
			t.Shape = append(t.Shape, n)
		}
	}
	return t, nil
}
