package tfswap_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tfswap/tfswap"
)

// This example plans the committed residual-network fixture for a GPU budget of 6 MiB, below
// the 7.9 MiB its training step needs as it is, writes the rewritten graph, and prints the
// report: the tensors swapped and the op whose completion brings each back, and the
// prediction for the default device (a 16 GB V100 on PCIe 3.0).
func Example() {
	m, err := tfswap.Load("testmodels/fixtures/resnet.pb")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := tfswap.Plan(m, tfswap.Options{Budget: 6 << 20, Fetch: []string{"train"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "tfswap-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := res.Model.Write(filepath.Join(dir, "resnet.swap.pb"), tfswap.WriteOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	rep := res.Report
	for _, s := range rep.Swaps {
		fmt.Printf("swap %s (%d KiB), back in before %s\n", s.Tensor, s.Bytes>>10, s.SwapIns[0].Trigger)
	}
	p := rep.Prediction
	fmt.Printf("strategy %s on %s (%s), fits: %v\n", p.Strategy, p.Device, p.DeviceSource, p.Fits)
	for _, d := range p.Devices {
		fmt.Printf("%s: peak %.1f MiB of %.1f MiB (unswapped %.1f MiB); by Grappler's rules %.1f MiB, %.1f MiB in microseconds; judged by %v\n",
			d.Name, mib(d.Peak), mib(d.Budget), mib(d.UnswappedPeak), mib(d.GrapplerPeak), mib(d.GrapplerPeakUS), d.Judged)
	}
	fmt.Printf("step %v (unswapped %v), %d KiB to the host and %d KiB back\n", p.StepTime, p.UnswappedStepTime, p.ToHost>>10, p.ToDevice>>10)
	fmt.Printf("simulated: the fan-in of %v, %d nodes\n", p.Fetch, p.SimulatedNodes)
	// Output:
	// swap stem/conv/Conv2D:0 (512 KiB), back in before gradients/block2/a/conv/Conv2D_grad/Conv2DBackpropFilter
	// swap stem/Relu:0 (512 KiB), back in before gradients/block2/a/Relu_grad/ReluGrad
	// swap block1/a/conv/Conv2D:0 (512 KiB), back in before gradients/block2/b/conv/Conv2D_grad/Conv2DBackpropInput
	// swap block1/b/conv/Conv2D:0 (512 KiB), back in before gradients/AddN_1
	// swap block1/out:0 (512 KiB), back in before gradients/block3/shortcut/conv/Conv2D_grad/Conv2DBackpropFilter
	// swap block2/a/Relu:0 (512 KiB), back in before gradients/AddN
	// strategy auto on v100-16gb (default), fits: true
	// /device:GPU:0: peak 5.0 MiB of 6.0 MiB (unswapped 7.9 MiB); by Grappler's rules 4.7 MiB, 5.1 MiB in microseconds; judged by [tfswap grappler-ns grappler-us]
	// step 1.090066ms (unswapped 1.09006ms), 3072 KiB to the host and 3072 KiB back
	// simulated: the fan-in of [train], 512 nodes
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// This example asks for a budget no plan can meet: the error is a *NoFitError, which says
// what is live on the device at the lowest peak any plan reached.
func ExampleNoFitError() {
	m, err := tfswap.Load("testmodels/fixtures/cnn.pb")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = tfswap.Plan(m, tfswap.Options{Budget: 1 << 20, Fetch: []string{"train"}})
	var nf *tfswap.NoFitError
	if !errors.As(err, &nf) {
		fmt.Println("planned:", err)
		return
	}
	fmt.Println("no fit:", errors.Is(err, tfswap.ErrNoFit))
	fmt.Printf("%s: lowest peak %d KiB, budget %d KiB\n", nf.Device, nf.Peak>>10, nf.Budget>>10)
	fmt.Printf("live then: weights %d KiB, optimizer slots %d KiB, activations %d KiB\n", nf.Weights>>10, nf.Slots>>10, nf.Activations>>10)
	for _, l := range nf.Largest[:2] {
		fmt.Printf("  %s (%s, %d KiB)\n", l.Name, l.Op, l.Bytes>>10)
	}
	// Output:
	// no fit: true
	// /device:GPU:0: lowest peak 2101 KiB, budget 1024 KiB
	// live then: weights 450 KiB, optimizer slots 449 KiB, activations 808 KiB
	//   gradients/block1/Relu_grad/ReluGrad:0 (ReluGrad, 392 KiB)
	//   gradients/block1/bn/FusedBatchNormV3_grad/FusedBatchNormGradV3:0 (FusedBatchNormGradV3, 392 KiB)
}
