//go:build tensorflow

package session_test

import (
	"fmt"
	"math"

	"github.com/tfswap/tfswap"
	"github.com/tfswap/tfswap/session"
)

// This example rewrites the residual-network fixture for a budget of 6 MiB in the two-device
// CPU emulation (/device:CPU:1 stands for the GPU, /device:CPU:0 is the host), trains the
// rewritten graph and the graph as it was for two steps each in sessions of their own, and
// compares their losses to the bit. A traced step of each then says how many tensors crossed
// between the devices, and how many of them were swaps (a fed tensor arrives on the host, so
// its swap-out copies nothing across).
func Example() {
	m, err := tfswap.Load("../testmodels/fixtures/resnet.pb")
	if err != nil {
		fmt.Println(err)
		return
	}
	placed, err := m.Place("/device:CPU:1")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := tfswap.Plan(placed, tfswap.Options{Budget: 6 << 20, Fetch: []string{"train"}, ComputeDevice: "/device:CPU:1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fx, err := session.LoadFixture("../testmodels/fixtures/resnet.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	train := func(model *tfswap.Model) ([]float64, *session.StepStats, error) {
		s, err := session.Open(model, session.Config{TwoDevice: true})
		if err != nil {
			return nil, nil, err
		}
		defer s.Close()
		if _, err := s.Run(nil, nil, fx.InitOp); err != nil {
			return nil, nil, err
		}
		losses, err := s.Train(fx.Step, 2)
		if err != nil {
			return nil, nil, err
		}
		st, err := s.TraceStep(fx.Step)
		return losses, st, err
	}
	swapped, st, err := train(res.Model)
	if err != nil {
		fmt.Println(err)
		return
	}
	unswapped, st0, err := train(placed)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("planned: %d tensors swapped, predicted peak %.1f MiB of %.1f MiB\n", len(res.Report.Swaps),
		float64(res.Report.Prediction.Devices[0].Peak)/(1<<20), float64(res.Report.Prediction.Budget)/(1<<20))
	for i := range swapped {
		fmt.Printf("step %d: loss %.4f, bit-identical to the unswapped graph's: %v\n", i+1, swapped[i], math.Float64bits(swapped[i]) == math.Float64bits(unswapped[i]))
	}
	for _, c := range []struct {
		name string
		st   *session.StepStats
	}{{"rewritten", st}, {"unswapped", st0}} {
		fmt.Printf("%s: %d tensors to the device (%d swap-ins), %d to the host (%d swap-outs), %d control edges across\n",
			c.name, c.st.ToDevice, c.st.SwapIns, c.st.ToHost, c.st.SwapOuts, c.st.Controls)
	}
	for _, d := range st.Devices {
		if d.Compute {
			fmt.Printf("%s ran %s: its allocator %q is shared with the host: %v\n", d.Device, "the step", d.Allocator, d.Shared)
		}
	}
	// Output:
	// planned: 6 tensors swapped, predicted peak 5.0 MiB of 6.0 MiB
	// step 1: loss 2.6151, bit-identical to the unswapped graph's: true
	// step 2: loss 2.2514, bit-identical to the unswapped graph's: true
	// rewritten: 8 tensors to the device (6 swap-ins), 7 to the host (6 swap-outs), 7 control edges across
	// unswapped: 2 tensors to the device (0 swap-ins), 1 to the host (0 swap-outs), 1 control edges across
	// /job:localhost/replica:0/task:0/device:CPU:1 ran the step: its allocator "cpu" is shared with the host: true
}
