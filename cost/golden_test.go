package cost

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"image/png"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/internal/testgraph"
)

var update = flag.Bool("update", false, "rewrite the .golden files")

func loadFixture(t testing.TB, name string) *graphdef.Graph {
	t.Helper()
	path := filepath.Join("..", "testmodels", "fixtures", name+".pb")
	_, g := testgraph.Load(t, path)
	return g
}

// describe renders a result as golden text.
func describe(r *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "profile %s, accounting %s, fetch %v, batch x%d\n", r.Profile.Name, ConventionsName(r.Options.Conventions), r.Options.Fetch, r.Options.BatchScale)
	fmt.Fprintf(&b, "simulated %d nodes, step %d ns, unsized tensors %d, unknown ops %v\n", r.Simulated, r.StepTime, r.UnsizedTensors, r.UnknownOps)
	fmt.Fprintf(&b, "d2h %d transfers %d B, h2d %d transfers %d B\n", r.D2H.Count, r.D2H.Bytes, r.H2D.Count, r.H2D.Bytes)
	if r.PrunedNodes > 0 {
		fmt.Fprintf(&b, "value-dead nodes run as NoOps: %d\n", r.PrunedNodes)
	}
	for _, d := range r.Devices {
		fmt.Fprintf(&b, "%s: peak %d B at %d ns, resident %d B, %d ops busy %d ns, swap-in stall %d ns, idle %d ns, %d live at peak\n",
			d.Name, d.PeakBytes, d.PeakTime, d.ResidentBytes, d.Ops, d.BusyTime, d.SwapInStall, d.IdleTime, d.LiveCount)
		for _, l := range d.Live {
			fmt.Fprintf(&b, "  %-60s %9d %-10s %s since %d\n", l.Name, l.Bytes, l.Kind, l.Op, l.Since)
		}
		if d.MicrosecondPeakBytes > 0 {
			fmt.Fprintf(&b, "%s: microsecond peak %d B at %d ns, %d live\n", d.Name, d.MicrosecondPeakBytes, d.MicrosecondPeakTime, d.MicrosecondLiveCount)
		}
	}
	if tl := r.Timeline; tl != nil {
		for _, o := range tl.Ops {
			fmt.Fprintf(&b, "op %s %s %d-%d\n", o.Node.Name, r.Devices[o.Device].Name, o.Start, o.End)
		}
		for _, x := range tl.Xfers {
			fmt.Fprintf(&b, "xfer %s %s queued %d, %d-%d, %d B\n", x.Tensor, x.Engine, x.Enqueue, x.Start, x.End, x.Bytes)
		}
	}
	return b.String()
}

// checkGolden compares got with testdata/NAME.golden (testgraph.Golden; -update rewrites it).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	testgraph.Golden(t, filepath.Join("testdata", name+".golden"), got, *update)
}

// TestGolden pins the simulator's predictions for the fixtures (v100-16gb, one training
// step) with tfswap's and Grappler's accounting, and the full timeline of the hand-built swap
// graph.
func TestGolden(t *testing.T) {
	p, err := LookupProfile("v100-16gb")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mlp", "cnn", "resnet", "lstm"} {
		g := loadFixture(t, name)
		for _, conv := range []Conventions{{}, GrapplerConventions()} {
			r, err := Simulate(g, p, Options{Fetch: []string{"train"}, Conventions: conv, TopLive: 8})
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name+"_"+ConventionsName(conv), describe(r))
		}
	}
	r, err := Simulate(swapGraph(t), unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "swap_unit", describe(r))
	r, err = Simulate(loadFixture(t, "resnet"), p, Options{Fetch: []string{"train"}, BatchScale: 8, TopLive: 5})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "resnet_batch8", describe(r))
}

func TestTraceAndPlot(t *testing.T) {
	base, err := Simulate(chainGraph(t), unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	swap, err := Simulate(swapGraph(t), unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	runs := []Run{{Label: "chain", Result: base}, {Label: "swap", Result: swap}}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, runs); err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Name string         `json:"name"`
			Pid  int            `json:"pid"`
			Tid  int            `json:"tid"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	threads := map[string]bool{}
	var counters, ops int
	for _, e := range tr.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Name == "thread_name" || e.Name == "process_name" {
				threads[e.Args["name"].(string)] = true
			}
		case "C":
			counters++
		case "X":
			ops++
			if e.Name == "c" && e.Pid == 200 && (e.Ts != 7.17 || e.Dur != 3.072) {
				t.Errorf("c in the swap run: ts %v dur %v", e.Ts, e.Dur)
			}
		}
	}
	for _, want := range []string{"chain /device:GPU:0", "swap /device:GPU:0", "swap /device:CPU:0", "compute stream",
		"/device:GPU:0 D2H copy engine", "/device:GPU:0 H2D copy engine"} {
		if !threads[want] {
			t.Errorf("trace has no track %q (has %v)", want, threads)
		}
	}
	if counters == 0 || ops != 6+8+3 {
		t.Errorf("%d counter events, %d spans", counters, ops)
	}
	buf.Reset()
	if err := WritePlotSVG(&buf, runs, PlotOptions{}); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("the SVG is not well-formed XML: %v", err)
			}
			break
		}
	}
	svg := buf.String()
	for _, want := range []string{"time since the start of the step (µs)", "device memory allocated (bytes)", "budget 1.00 MiB", "chain: peak 2.0 KiB", "swap: peak 2.0 KiB"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot has no %q", want)
		}
	}
	if err := WritePlotSVG(&buf, []Run{{Label: "x", Result: &Result{}}}, PlotOptions{}); err == nil {
		t.Error("a result without a timeline was plotted")
	}
	buf.Reset()
	if err := WritePlotPNG(&buf, runs, PlotOptions{}); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1920 || b.Dy() != 960 {
		t.Errorf("PNG is %v, want 1920x960", b)
	}
	// The baseline's curve colour is drawn somewhere.
	found := false
	for y := 0; y < 960 && !found; y += 2 {
		for x := 0; x < 1920; x += 2 {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 == 0x4c && g>>8 == 0x72 && b>>8 == 0xb0 {
				found = true
				break
			}
		}
	}
	if !found {
		t.Error("the PNG has no curve in the first series' colour")
	}
}

func BenchmarkSimulateResnetFixture(b *testing.B) {
	g := loadFixture(b, "resnet")
	p, _ := LookupProfile("v100-16gb")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Simulate(g, p, Options{Fetch: []string{"train"}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimulateResNet50 needs testmodels/large/resnet50.pb (testmodels/large.py).
func BenchmarkSimulateResNet50(b *testing.B) {
	path := filepath.Join("..", "testmodels", "large", "resnet50.pb")
	m, err := graphdef.Load(path, graphdef.LoadOptions{})
	if err != nil {
		b.Skipf("%v (generate it with .venv/bin/python testmodels/large.py --all)", err)
	}
	g, err := graphdef.NewGraph(m.Graph, path)
	if err != nil {
		b.Fatal(err)
	}
	p, _ := LookupProfile("v100-16gb")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Simulate(g, p, Options{Fetch: []string{"train"}, Timeline: true}); err != nil {
			b.Fatal(err)
		}
	}
}
