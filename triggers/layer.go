package triggers

import (
	"github.com/tfswap/tfswap/graphdef"
)

// ByLayer returns the trigger vDNN's prefetch uses (Rhu et al., MICRO'16, Fig. 10): the
// prefetch of a layer's input feature map is launched when the backward computation of the
// layer after it starts, and the search never reaches past the closest convolution. Walking
// back from the earliest consumer along its critical path among the producer's descendants
// (as ByDistance does), it finds the
// nearest layer op (isLayer, typically a convolution or its gradient) strictly before the
// consumer and returns the last eligible op before that layer op, so that the copy overlaps
// the layer op's computation. When no layer op lies between the producer and the consumer, it
// falls back to ByDistance with one level ahead.
func ByLayer(producer *graphdef.Node, consumers []*graphdef.Node, isLayer func(*graphdef.Node) bool, eligible Eligible) (*graphdef.Node, error) {
	if len(consumers) == 0 {
		return ByDistance(producer, consumers, 1, eligible)
	}
	d := newDescent(producer)
	first := Earliest(consumers)
	notAfter := beforeAll(consumers)
	var layer *graphdef.Node
	for next := criticalInput(first, d); next != nil && next.Level > producer.Level; next = criticalInput(next, d) {
		if isLayer(next) {
			layer = next
			break
		}
	}
	if layer != nil {
		for next := criticalInput(layer, d); next != nil && next.Level > producer.Level; next = criticalInput(next, d) {
			if (eligible == nil || eligible(next)) && !notAfter(next) {
				return next, nil
			}
		}
	}
	return ByDistance(producer, consumers, 1, eligible)
}
