package fakegpu

import (
	"flag"
	"os"
	"testing"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/graphdef"
	"google.golang.org/protobuf/proto"
)

var update = flag.Bool("update", false, "rewrite the constructed step stats in testdata/")

// TestConstructedTestdata rebuilds the constructed step stats kept in testdata/ (see
// testdata/README.md) and checks that they are what the committed files hold; -update
// rewrites them.
func TestConstructedTestdata(t *testing.T) {
	for _, c := range Testdata() {
		g := graphOf(t, c)
		s, err := Construct(g, v100(t), Options{Fetch: []string{"train"}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := MarshalText(s.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		path := c.Path(root)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// The text is compared as the proto it holds: Go's prototext chooses its whitespace by a
		// hash of the binary, so two builds write the same proto differently.
		md, err := LoadMetadata(path)
		if err != nil {
			t.Fatalf("%v (go test ./profiling/fakegpu -update writes it)", err)
		}
		if !proto.Equal(md, s.Metadata) {
			t.Errorf("%s differs from what Construct builds now (go test ./profiling/fakegpu -run TestConstructedTestdata -update rewrites it)", path)
		}
		if len(md.GetStepStats().GetDevStats()) != len(s.Metadata.GetStepStats().GetDevStats()) {
			t.Errorf("%s: reading it back lost devices", path)
		}
	}
}

// TestConstructStructure checks the constructed step against the facts it must carry: the
// executor's and the tracer's device names, the allocator's records, and a swapped graph's
// copies and lower peak.
func TestConstructStructure(t *testing.T) {
	cases := Testdata()
	plain, err := Construct(graphOf(t, cases[0]), v100(t), Options{Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	swapped, err := Construct(graphOf(t, cases[1]), v100(t), Options{Fetch: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	devs := map[string]int{}
	for _, d := range swapped.Metadata.GetStepStats().GetDevStats() {
		devs[d.GetDevice()] = len(d.GetNodeStats())
	}
	for _, want := range []string{GPUDevice, HostDevice, "/device:GPU:0/stream:all", "/device:GPU:0/stream:7",
		"/device:GPU:0/stream:13<MemcpyH2D>", "/device:GPU:0/stream:14<MemcpyD2H>", "/device:GPU:0/memcpy", "/device:GPU:0/sync"} {
		if devs[want] == 0 {
			t.Errorf("swapped step: no entries on %q (%v)", want, devs)
		}
	}
	if devs["/device:GPU:0/stream:all"] != devs["/device:GPU:0/stream:7"] || len(swapped.KernelNS) == 0 {
		t.Errorf("stream:all holds %d kernels, stream:7 %d", devs["/device:GPU:0/stream:all"], devs["/device:GPU:0/stream:7"])
	}
	if swapped.D2HCopies == 0 || swapped.H2DCopies == 0 {
		t.Errorf("swapped step: %d D2H, %d H2D copies", swapped.D2HCopies, swapped.H2DCopies)
	}
	if plain.Resident <= 0 || plain.Peak <= plain.Resident || plain.StepPeak <= 0 || plain.StepPeak > plain.Peak-plain.Resident+int64(len(graphOf(t, cases[0]).Nodes))*256 {
		t.Errorf("unswapped: resident %d, peak %d, step peak %d", plain.Resident, plain.Peak, plain.StepPeak)
	}
	if swapped.Resident != plain.Resident || swapped.Peak >= plain.Peak {
		t.Errorf("swapping did not lower the constructed peak: %d -> %d (resident %d, %d)", plain.Peak, swapped.Peak, plain.Resident, swapped.Resident)
	}
	noTracer, err := Construct(graphOf(t, cases[0]), v100(t), Options{Fetch: []string{"train"}, NoTracer: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(noTracer.Metadata.GetStepStats().GetDevStats()); n != 2 {
		t.Errorf("without the tracer: %d devices, want the executor's 2", n)
	}
}

func v100(t *testing.T) *cost.Profile {
	t.Helper()
	p, err := cost.LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// root is the repository's root, from this package.
const root = "../.."

func graphOf(t *testing.T, c Case) *graphdef.Graph {
	t.Helper()
	g, err := c.Graph(root)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
