package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// negativeSize matches a size printed as negative ("-1.5 GiB", "--9223372036854775808 B").
var negativeSize = regexp.MustCompile(`-[0-9.]+ (B|KiB|MiB|GiB)\b`)

// TestSizeOverflowRefused: sizes that int64 cannot count are refused with the tensor named
// and exit status 1, never wrapped around into a panic, a small peak or a negative size
// (issue 11, item 5).
func TestSizeOverflowRefused(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.pb")
	huge := "../../graphdef/testdata/invalid/huge_shape.pbtxt"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rewrite", planFixture, "-o", out, "--device", "v100-16gb", "--batch-scale", "10000000000"}, "batch scale 10000000000: tensor "},
		{[]string{"rewrite", planFixture, "-o", out, "--device", "v100-16gb", "--batch-scale", "4611686018427387904"}, "batch scale 4611686018427387904: tensor "},
		{[]string{"simulate", planFixture, "--device", "v100-16gb", "--batch-scale", "4611686018427387904"}, "batch scale 4611686018427387904: tensor "},
		{[]string{"rewrite", huge, "-o", out}, "tensor big:0 has shape"},
		{[]string{"inspect", huge}, "tensor big:0 has shape"},
		{[]string{"simulate", huge, "--device", "v100-16gb"}, "tensor big:0 has shape"},
	} {
		code, stdout, stderr := runSimCLI(t, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "PiB") {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.want)
		}
		if m := negativeSize.FindString(stdout + stderr); m != "" {
			t.Errorf("%v prints a negative size %q", tc.args, m)
		}
	}
}
