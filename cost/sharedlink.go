package cost

import (
	"strconv"

	"github.com/tfswap/tfswap/graphdef"
)

// Shared host links.
//
// GPUs behind one PCIe switch share the switch's uplink to the host (Kim et al., "Efficient
// Multi-GPU Memory Management for Deep Learning Acceleration": N GPUs swapping at once take N
// times as long). Options.SharedLinks lists such groups; every GPU of a group then uses the
// group's copy engines instead of its own: one device-to-host and one host-to-device queue
// for the whole group (one queue in all when the profile is not duplex), each running one
// transfer at a time at the profile's link rate. Serialising the group's transfers gives the
// same total transfer time as sharing the bandwidth between concurrent transfers; what it
// does not model is that a transfer started second finishes no earlier than with fair sharing.

// linkGroup returns the index of the Options.SharedLinks group that names the device called
// name, or -1. A group member may be a partial device spec ("/device:GPU:1"); it matches the
// devices whose set fields agree with it.
func (s *sim) linkGroup(name string) int {
	dev, err := graphdef.ParseDevice(name)
	if err != nil {
		return -1
	}
	for i, group := range s.opts.SharedLinks {
		for _, member := range group {
			spec, err := graphdef.ParseDevice(member)
			if err != nil || spec.Type == "" {
				continue
			}
			if dev.Matches(spec) {
				return i
			}
		}
	}
	return -1
}

// makeEngines creates the copy engines of the GPUs: per GPU one device-to-host and one
// host-to-device engine (one engine for both when the profile is not duplex), and one set per
// shared link group.
func (s *sim) makeEngines() {
	shared := map[int][2]int32{}
	for _, d := range s.devs {
		if !d.gpu {
			continue
		}
		group := s.linkGroup(d.name)
		if e, ok := shared[group]; ok && group >= 0 {
			d.d2h, d.h2d = e[0], e[1]
			continue
		}
		d.d2h = s.newEngine(d, false)
		if s.p.Duplex {
			d.h2d = s.newEngine(d, true)
		} else {
			d.h2d = d.d2h
			s.engs[d.d2h].name = d.name + " copy"
		}
		if group >= 0 {
			link := "shared link " + strconv.Itoa(group)
			if s.p.Duplex {
				s.engs[d.d2h].name = link + " D2H"
				s.engs[d.h2d].name = link + " H2D"
			} else {
				s.engs[d.d2h].name = link + " copy"
			}
			shared[group] = [2]int32{d.d2h, d.h2d}
		}
	}
}
