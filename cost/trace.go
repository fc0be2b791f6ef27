package cost

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Run is a labelled simulation result, for traces and plots.
type Run struct {
	Label  string
	Result *Result
}

// WriteTrace writes the timelines of runs (simulated with Options.Timeline) as a Chrome trace
// event file (the JSON format chrome://tracing, Perfetto and TensorFlow's profiler read): one
// process per device and run, with a thread for the compute stream and one per copy engine,
// and a "memory" counter track per device. Times are microseconds from the start of the step.
func WriteTrace(w io.Writer, runs []Run) error {
	bw := bufio.NewWriter(w)
	fmt.Fprint(bw, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
	first := true
	emit := func(ev map[string]any) error {
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		_, err = bw.Write(data)
		return err
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	for ri, run := range runs {
		tl := run.Result.Timeline
		if tl == nil {
			return fmt.Errorf("run %q was simulated without a timeline", run.Label)
		}
		devs := run.Result.Devices
		pid := func(dev int) int { return (ri+1)*100 + dev }
		// Threads: 1 is the compute stream, then one per copy engine of the device, in order
		// of first use.
		engines := map[string]int{}
		engineOwner := map[string]int{}
		var engineOrder []string
		next := map[int]int{}
		for _, x := range tl.Xfers {
			if _, ok := engines[x.Engine]; ok {
				continue
			}
			owner := x.Src
			if devs[x.Dst].GPU && !devs[x.Src].GPU {
				owner = x.Dst
			}
			if next[owner] == 0 {
				next[owner] = 2
			}
			engines[x.Engine] = next[owner]
			next[owner]++
			engineOwner[x.Engine] = owner
			engineOrder = append(engineOrder, x.Engine)
		}
		for i, d := range devs {
			name := d.Name
			if run.Label != "" {
				name = run.Label + " " + d.Name
			}
			if err := emit(map[string]any{"ph": "M", "name": "process_name", "pid": pid(i), "args": map[string]any{"name": name}}); err != nil {
				return err
			}
			emit(map[string]any{"ph": "M", "name": "process_sort_index", "pid": pid(i), "args": map[string]any{"sort_index": pid(i)}})
			stream := "compute stream"
			if !d.GPU {
				stream = "host ops"
			}
			emit(map[string]any{"ph": "M", "name": "thread_name", "pid": pid(i), "tid": 1, "args": map[string]any{"name": stream}})
		}
		for _, e := range engineOrder {
			tid := engines[e]
			emit(map[string]any{"ph": "M", "name": "thread_name", "pid": pid(engineOwner[e]), "tid": tid, "args": map[string]any{"name": e + " copy engine"}})
		}
		for _, op := range tl.Ops {
			ev := map[string]any{"ph": "X", "name": op.Node.Name, "cat": op.Node.Op, "pid": pid(op.Device), "tid": 1,
				"ts": us(op.Start), "dur": us(op.End - op.Start), "args": map[string]any{"op": op.Node.Op}}
			if err := emit(ev); err != nil {
				return err
			}
		}
		for _, x := range tl.Xfers {
			ev := map[string]any{"ph": "X", "name": x.Tensor, "cat": "transfer", "pid": pid(engineOwner[x.Engine]), "tid": engines[x.Engine],
				"ts": us(x.Start), "dur": us(x.End - x.Start),
				"args": map[string]any{"bytes": x.Bytes, "from": devs[x.Src].Name, "to": devs[x.Dst].Name, "queued_us": us(x.Start - x.Enqueue)}}
			if err := emit(ev); err != nil {
				return err
			}
		}
		for i, pts := range tl.Memory {
			for _, p := range pts {
				ev := map[string]any{"ph": "C", "name": "memory", "pid": pid(i), "ts": us(p.T), "args": map[string]any{"bytes": p.Bytes}}
				if err := emit(ev); err != nil {
					return err
				}
			}
		}
		// A marker at each device's peak.
		for i, d := range devs {
			ev := map[string]any{"ph": "i", "s": "p", "name": "peak " + strconv.FormatInt(d.PeakBytes, 10) + " B", "pid": pid(i), "tid": 1, "ts": us(d.PeakTime)}
			if err := emit(ev); err != nil {
				return err
			}
		}
	}
	fmt.Fprint(bw, "\n]}\n")
	return bw.Flush()
}
