package cost

import (
	"testing"
)

// twoGPUSwapGraph is swapGraph on two GPUs: each swaps its own f to its CPU at the same time.
func twoGPUSwapGraph(t *testing.T) *builder {
	b := newBuilder()
	v := []int64{256}
	for _, d := range []string{"/device:GPU:0", "/device:GPU:1"} {
		p := d[len(d)-1:]
		b.op("x"+p, "Placeholder", d, v)
		b.op("f"+p, "Neg", d, v, "x"+p)
		b.op("h"+p, "Neg", d, v, "f"+p)
		b.op("so"+p, "Identity", cpu0, v, "f"+p)
		b.op("c"+p, "Mul", d, v, "h"+p, "so"+p)
	}
	return b
}

func TestSimulateSharedLink(t *testing.T) {
	g := twoGPUSwapGraph(t).graph(t)
	ends := func(r *Result) map[string]int64 {
		m := map[string]int64{}
		for _, x := range r.Timeline.Xfers {
			if x.Tensor == "f0:0" || x.Tensor == "f1:0" {
				m[x.Tensor+" "+x.Engine] = x.End
			}
		}
		return m
	}
	own, err := Simulate(g, unitProfile(), Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// Separate links: both 1 KiB copies run at once, 1024 ns each after f ends at 2049.
	if got := ends(own); got["f0:0 /device:GPU:0 D2H"] != 3073 || got["f1:0 /device:GPU:1 D2H"] != 3073 {
		t.Errorf("own links: %v", got)
	}
	shared, err := Simulate(g, unitProfile(), Options{Timeline: true, SharedLinks: [][]string{{"/device:GPU:0", "/device:GPU:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	// One link: the second copy queues behind the first.
	got := ends(shared)
	if len(got) != 2 || got["f0:0 shared link 0 D2H"]+got["f1:0 shared link 0 D2H"] != 3073+4097 {
		t.Errorf("shared link: %v", got)
	}
	if shared.StepTime <= own.StepTime {
		t.Errorf("sharing the link did not slow the step: %d vs %d", shared.StepTime, own.StepTime)
	}
}
