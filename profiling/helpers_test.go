package profiling

import "github.com/tfswap/tfswap/cost"

func parseMeasured(data []byte) (*cost.Measured, error) { return cost.ParseMeasured(data, "profile") }

func byName(nodes []cost.MeasuredNode, name string) *cost.MeasuredNode {
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}
