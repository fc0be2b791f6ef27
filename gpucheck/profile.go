package gpucheck

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tfswap/tfswap/cost"
	"github.com/tfswap/tfswap/internal/units"
	"github.com/tfswap/tfswap/tfrun"
)

// ProfileMatch is the built-in device profile chosen for a GPU, and why.
type ProfileMatch struct {
	Profile *cost.Profile
	// By says how it was chosen: "name" (the GPU's model name names the profile's GPU and
	// the compute capabilities agree), "capability" (same compute capability), "major" (same
	// major version), "nearest" (nearest compute capability) or "memory" (the GPU reported
	// no compute capability).
	By string
	// Reason says it in a sentence.
	Reason string
}

// families maps each built-in profile's GPU to the token its model names contain.
var families = []struct{ token, prefix string }{
	{"gh200", "gh200"}, {"h100", "h100"}, {"a100", "a100"}, {"v100", "v100"},
	{"1080ti", "gtx1080ti"}, {"titanx", "titanx"},
}

// normalizeModel lowercases a model name and drops everything but letters and digits:
// "NVIDIA GeForce GTX 1080 Ti" -> "nvidiageforcegtx1080ti".
func normalizeModel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseCC reads a compute capability "X.Y" as X*10+Y; ok is false for anything else.
func parseCC(s string) (int, bool) {
	maj, minor, ok := strings.Cut(s, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 || b > 9 {
		return 0, false
	}
	return a*10 + b, true
}

// MatchProfile picks the built-in profile (among profiles) nearest to gpu:
//
//  1. a profile of the GPU the model name names (V100, A100, H100, GH200, GTX 1080 Ti, GTX
//     TITAN X) whose compute capability agrees with the GPU's when it reported one;
//  2. otherwise a profile with the same compute capability, then the same major version,
//     then the nearest compute capability;
//  3. among the profiles a rule admits, the one whose memory is nearest TensorFlow's memory
//     limit of the GPU (ties by name).
//
// Profiles of GPUs linked to a POWER9 host by NVLink (v100-*-nvlink) are chosen only when
// hostArch is "ppc64le": on any other host a V100 talks to the CPU over PCIe.
func MatchProfile(gpu tfrun.GPU, profiles []*cost.Profile, hostArch string) (*ProfileMatch, error) {
	var cands []*cost.Profile
	for _, p := range profiles {
		power9 := strings.Contains(p.Link, "POWER9")
		if power9 != (hostArch == "ppc64le") {
			continue
		}
		cands = append(cands, p)
	}
	if len(cands) == 0 {
		cands = profiles
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("gpucheck: no device profiles to choose from")
	}
	cc, hasCC := parseCC(gpu.ComputeCapability)
	model := normalizeModel(gpu.Model)
	nearest := func(ps []*cost.Profile) *cost.Profile {
		sort.SliceStable(ps, func(i, j int) bool {
			di := math.Abs(float64(ps[i].MemoryBytes - gpu.MemoryBytes))
			dj := math.Abs(float64(ps[j].MemoryBytes - gpu.MemoryBytes))
			if di != dj {
				return di < dj
			}
			return ps[i].Name < ps[j].Name
		})
		return ps[0]
	}
	names := func(ps []*cost.Profile) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.Name)
		}
		sort.Strings(s)
		return strings.Join(s, ", ")
	}
	mem := units.FormatBytes(gpu.MemoryBytes)
	pick := func(by string, ps []*cost.Profile, why string) *ProfileMatch {
		p := nearest(ps)
		if len(ps) > 1 {
			why += fmt.Sprintf("; of %s the nearest in memory to the %s TensorFlow can use", names(ps), mem)
		}
		return &ProfileMatch{Profile: p, By: by, Reason: why}
	}
	for _, f := range families {
		if model == "" || !strings.Contains(model, f.token) {
			continue
		}
		var ps []*cost.Profile
		for _, p := range cands {
			pcc, _ := parseCC(p.ComputeCapability)
			if strings.HasPrefix(p.Name, f.prefix) && (!hasCC || pcc == cc) {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			return pick("name", ps, fmt.Sprintf("the model name %q names the GPU of %s (compute capability %s)", gpu.Model, f.prefix, ps[0].ComputeCapability)), nil
		}
	}
	label := gpu.Model
	if label == "" {
		label = gpu.Device
	}
	if !hasCC {
		return pick("memory", cands, fmt.Sprintf("no built-in profile names %q, which reported no compute capability", label)), nil
	}
	var same, major []*cost.Profile
	for _, p := range cands {
		pcc, ok := parseCC(p.ComputeCapability)
		switch {
		case !ok:
		case pcc == cc:
			same = append(same, p)
		case pcc/10 == cc/10:
			major = append(major, p)
		}
	}
	if len(same) > 0 {
		return pick("capability", same, fmt.Sprintf("no built-in profile names %q; same compute capability %s", label, gpu.ComputeCapability)), nil
	}
	if len(major) > 0 {
		return pick("major", major, fmt.Sprintf("no built-in profile names %q or has its compute capability %s; same major version %d", label, gpu.ComputeCapability, cc/10)), nil
	}
	best := -1
	var near []*cost.Profile
	for _, p := range cands {
		pcc, ok := parseCC(p.ComputeCapability)
		if !ok {
			continue
		}
		d := pcc - cc
		if d < 0 {
			d = -d
		}
		switch {
		case best < 0 || d < best:
			best, near = d, []*cost.Profile{p}
		case d == best:
			near = append(near, p)
		}
	}
	if len(near) == 0 {
		return pick("memory", cands, fmt.Sprintf("no built-in profile names %q or gives a compute capability", label)), nil
	}
	return pick("nearest", near, fmt.Sprintf("no built-in profile names %q or shares the major version of its compute capability %s; nearest compute capability %s", label, gpu.ComputeCapability, near[0].ComputeCapability)), nil
}
