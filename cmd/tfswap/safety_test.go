package main

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tfswap/tfswap/graphdef"
	"github.com/tfswap/tfswap/rewrite"
	"github.com/urfave/cli/v2"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// The red-team tests of issue 11 for the command line: exit statuses, output paths, empty
// and malformed input, panics.

const (
	safetyFixture  = "../../testmodels/fixtures/resnet.pb"
	tinySavedModel = "../../graphdef/testdata/tiny_savedmodel"
)

// TestMain runs main itself when the tests start this test binary as tfswap
// (TFSWAP_TEST_MAIN=1), so that exit statuses are those of a real process.
func TestMain(m *testing.M) {
	if os.Getenv("TFSWAP_TEST_MAIN") == "1" {
		main()
		return
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

// testPanicValue is what the hidden test-panic command panics with.
const testPanicValue = "index out of range [7] with length 3 (a test panic)"

func init() {
	// A command that panics, as a bug would: it exists only in the test binary.
	register(&cli.Command{Name: "test-panic", Hidden: true, Action: func(*cli.Context) error {
		panicInCommand()
		return nil
	}})
}

func panicInCommand() { panic(testPanicValue) }

// runProcess runs this test binary as tfswap with args and returns its exit status and
// output.
func runProcess(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "TFSWAP_TEST_MAIN=1")
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// TestPanicIsAnInternalError: a panic exits with status 3 and one line naming the panic
// value; the stack only with -v (issue 11 item 7).
func TestPanicIsAnInternalError(t *testing.T) {
	code, stdout, stderr := runProcess(t, nil, "test-panic")
	want := "tfswap: internal error: " + testPanicValue + " (please report; -v for the stack)\n"
	if code != exitInternal || stderr != want || stdout != "" {
		t.Errorf("exit %d, stderr %q, stdout %q; want exit 3 and %q", code, stderr, stdout, want)
	}
	for _, args := range [][]string{{"test-panic", "-v"}, {"-v", "test-panic"}, {"--verbose", "test-panic"}} {
		code, _, stderr = runProcess(t, nil, args...)
		if code != exitInternal || !strings.Contains(stderr, "internal error: "+testPanicValue) ||
			!strings.Contains(stderr, "panicInCommand") || !strings.Contains(stderr, "safety_test.go") {
			t.Errorf("%v: exit %d, stderr %q; want exit 3 with the stack", args, code, stderr)
		}
	}
}

// TestExitStatuses checks the statuses the README documents.
func TestExitStatuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rewrite", safetyFixture, "-o", filepath.Join(dir, "ok.pb")}, exitOK, ""},
		{[]string{"frobnicate", safetyFixture}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"-v", "frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, exitUsage, "No help topic"},
		{[]string{"rewrite", safetyFixture, "--no-such-flag"}, exitUsage, "flag provided but not defined"},
		{[]string{"rewrite", safetyFixture, "--budget", ""}, exitUsage, "--budget: empty value"},
		{[]string{"rewrite", safetyFixture, "-o", ""}, exitUsage, "--output (-o): empty value"},
		{[]string{"rewrite", safetyFixture, "--output="}, exitUsage, "--output (-o): empty value"},
		{[]string{"simulate", safetyFixture, "--device", "v100-16gb", "--fetch", ""}, exitUsage, "--fetch: empty value"},
		{[]string{"rewrite", filepath.Join(dir, "missing.pb")}, exitBadInput, "missing.pb"},
		{[]string{"test-panic"}, exitInternal, "internal error"},
	} {
		code, _, stderr := runProcess(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// fileState records a path's type and contents, to check that nothing the user owns changed.
func fileState(t *testing.T, path string) string {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		return "missing"
	}
	s := st.Mode().Type().String()
	switch {
	case st.Mode().IsRegular():
		b, _ := os.ReadFile(path)
		s += string(b)
	case st.Mode()&fs.ModeSymlink != 0:
		l, _ := os.Readlink(path)
		s += "->" + l
	case st.IsDir():
		filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err == nil && p != path {
				s += "|" + p + ":" + fileState(t, p)
			}
			return nil
		})
	}
	return s
}

// TestOutputsNeverReplaceUserFiles runs every command whose outputs the issue found
// overwriting inputs or each other, and every kind of output path, and checks the exit status,
// the message and that no file changed (issue 11 items 1, 2, 3).
func TestOutputsNeverReplaceUserFiles(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pb")
	data, err := os.ReadFile(safetyFixture)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(in, data, 0o644)
	out := filepath.Join(dir, "out.pb")
	os.WriteFile(out, []byte("an earlier output"), 0o644)
	os.Symlink("in.pb", filepath.Join(dir, "link-to-in.pb"))
	os.Link(in, filepath.Join(dir, "hardlink.pb"))
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sm := filepath.Join(dir, "parent", "model")
	os.MkdirAll(sm, 0o755)
	copyDir(t, tinySavedModel, sm)
	os.WriteFile(filepath.Join(dir, "parent", "notes.txt"), []byte("the user's notes"), 0o644)
	busy := filepath.Join(dir, "busy")
	os.Mkdir(busy, 0o755)
	os.WriteFile(filepath.Join(busy, "keep.txt"), []byte("keep me"), 0o644)
	prof := filepath.Join(dir, "profile.json")
	if code, _, stderr := runSimCLI(t, "simulate", "--device", "v100-16gb", "--dump-profile", prof); code != 0 {
		t.Fatal(stderr)
	}
	before := fileState(t, dir)

	sim := []string{"simulate", in, "--device", "v100-16gb", "--fetch", "train"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rewrite", in, "-o", out, "--report", in}, "--report " + in + ": is the same file as the input MODEL"},
		{[]string{"rewrite", in, "-o", out, "--report", out}, "is the same file as the output -o"},
		{[]string{"rewrite", in, "-o", filepath.Join(dir, ".", "in.pb")}, "use --in-place"},
		{[]string{"rewrite", in, "-o", filepath.Join(dir, "link-to-in.pb")}, "is the same file as the input"},
		{[]string{"rewrite", in, "-o", filepath.Join(dir, "hardlink.pb")}, "is the same file as the input"},
		{[]string{"rewrite", in, "-o", filepath.Join(dir, "adir", "..", "in.pb")}, "is the same file as the input"},
		{[]string{"rewrite", in, "-o", filepath.Join(dir, "new.pb"), "--report", filepath.Join(dir, "adir", "..", "new.pb")}, "is the same file as the output"},
		{[]string{"rewrite", in, "-o", filepath.Join(dir, "adir")}, "is a directory"},
		{[]string{"rewrite", in, "-o", sock}, "is a socket"},
		{[]string{"rewrite", in, "-o", out, "--report", "-"}, "--report writes a file"},
		{[]string{"place", in, "--device", "/device:CPU:1", "-o", in}, "is the same file as the input"},
		{append(sim, "--json", in), "--json " + in + ": is the same file as the input MODEL"},
		{append(sim, "--trace", in), "--trace " + in + ": is the same file as the input"},
		{append(sim, "--plot", filepath.Join(dir, "link-to-in.pb")+".svg", "--trace", filepath.Join(dir, "link-to-in.pb")+".svg"), "is the same file as the output"},
		{append(sim, "--dump-profile", in), "--dump-profile " + in + ": is the same file as the input"},
		{append(sim, "--json", out, "--trace", out), "is the same file as the output --json"},
		{append(sim, "--json", "-", "--dump-profile", "-"), "both write to stdout"},
		{append(sim, "--baseline", out, "--json", out), "is the same file as the input --baseline"},
		{append(sim, "--trace", "-"), "--trace writes a file"},
		{[]string{"simulate", "--device-file", prof, "--dump-profile", prof}, "--dump-profile " + prof + ": is the same file as the input --device-file"},
		{append(sim[:2:2], "--device-file", prof, "--json", prof), "is the same file as the input --device-file"},
		// SavedModels: never into a directory that holds anything, never into the input's
		// parent, never inside the input, never a directory named like a GraphDef file.
		{[]string{"rewrite", sm, "--tags", "train", "-o", busy}, "is a directory that is not empty"},
		{[]string{"rewrite", sm, "--tags", "train", "-o", filepath.Join(dir, "parent")}, "contains the input MODEL"},
		{[]string{"rewrite", sm, "--tags", "train", "-o", filepath.Join(sm, "variables", "x")}, "lies inside the input SavedModel"},
		{[]string{"rewrite", sm, "--tags", "train", "-o", filepath.Join(dir, "x"), "--report", filepath.Join(sm, "report.json")}, "lies inside the input SavedModel"},
		{[]string{"rewrite", filepath.Join(sm, "saved_model.pb"), "--tags", "train", "-o", filepath.Join(dir, "x"), "--report", filepath.Join(sm, "variables", "r.json")}, "lies inside the input SavedModel"},
		{[]string{"rewrite", sm, "--tags", "train", "-o", filepath.Join(dir, "sm.pb")}, "named like a GraphDef file: give --output-format pb"},
		{[]string{"place", sm, "--tags", "train", "--device", "/device:CPU:1", "-o", filepath.Join(dir, "parent")}, "contains the input MODEL"},
		{[]string{"place", sm, "--tags", "train", "--device", "/device:CPU:1", "-o", busy}, "is a directory that is not empty"},
		{[]string{"rewrite", in, "-o", filepath.Join(dir, "x"), "--output-format", "savedmodel"}, "is not a SavedModel"},
	} {
		code, _, stderr := runSimCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
		if after := fileState(t, dir); after != before {
			t.Fatalf("%q changed the user's files", tc.args)
		}
	}

	// What is allowed: --in-place replaces the input, a SavedModel written as a GraphDef
	// with --output-format pb, a SavedModel into an empty directory.
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	for _, args := range [][]string{
		{"rewrite", sm, "--tags", "train", "-o", filepath.Join(dir, "sm.pb"), "--output-format", "pb"},
		{"rewrite", sm, "--tags", "train", "-o", empty},
		{"rewrite", out, "--in-place"},
	} {
		if args[1] == out {
			os.WriteFile(out, data, 0o644)
		}
		if code, _, stderr := runSimCLI(t, args...); code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, stderr)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "sm.pb")); err != nil || !st.Mode().IsRegular() {
		t.Errorf("--output-format pb did not write a GraphDef file: %v", err)
	} else if _, err := graphdef.Load(filepath.Join(dir, "sm.pb"), graphdef.LoadOptions{}); err != nil {
		t.Errorf("sm.pb: %v", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "variables", "variables.index")); err != nil {
		t.Errorf("SavedModel into an empty directory: %v", err)
	}
	if got, _ := os.ReadFile(in); !bytes.Equal(got, data) {
		t.Error("the input changed")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "parent", "notes.txt")); string(got) != "the user's notes" {
		t.Error("the user's notes beside the input SavedModel were lost")
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOutputsWrittenThrough: a FIFO, /dev/null and a symbolic link are written through (the
// link to its target), never replaced by a regular file (issue 11 item 2).
func TestOutputsWrittenThrough(t *testing.T) {
	dir := t.TempDir()
	want, err := os.ReadFile(safetyFixture)
	if err != nil {
		t.Fatal(err)
	}
	// The plain rewrite's bytes, written to a regular file, to compare with.
	plain := filepath.Join(dir, "plain.pb")
	if code, _, stderr := runSimCLI(t, "rewrite", safetyFixture, "-o", plain); code != 0 {
		t.Fatal(stderr)
	}
	if want, err = os.ReadFile(plain); err != nil {
		t.Fatal(err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- b
	}()
	if code, _, stderr := runSimCLI(t, "rewrite", safetyFixture, "-o", fifo); code != 0 {
		t.Fatal(stderr)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("the FIFO carried %d bytes, want the %d of the rewrite", len(b), len(want))
	}
	if st, _ := os.Lstat(fifo); st.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced by a %v", st.Mode().Type())
	}

	report := filepath.Join(dir, "report.json")
	if code, _, stderr := runSimCLI(t, "rewrite", safetyFixture, "-o", os.DevNull, "--report", report); code != 0 {
		t.Fatal(stderr)
	}
	if st, err := os.Lstat(os.DevNull); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device", os.DevNull)
	}
	// Several outputs may share a character device: nothing is replaced.
	if code, _, stderr := runSimCLI(t, "simulate", safetyFixture, "--device", "v100-16gb", "--json", os.DevNull, "--trace", os.DevNull); code != 0 {
		t.Errorf("--json and --trace to %s: exit %d %s", os.DevNull, code, stderr)
	}
	if st, err := os.Lstat(os.DevNull); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device", os.DevNull)
	}

	target := filepath.Join(dir, "target.pb")
	os.WriteFile(target, []byte("old"), 0o600)
	link := filepath.Join(dir, "link.pb")
	os.Symlink("target.pb", link)
	if code, _, stderr := runSimCLI(t, "rewrite", safetyFixture, "-o", link); code != 0 {
		t.Fatal(stderr)
	}
	if st, _ := os.Lstat(link); st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced")
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, want) {
		t.Errorf("the link's target does not hold the rewrite")
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o600 {
		t.Errorf("the target's mode became %v", st.Mode().Perm())
	}
	for _, e := range mustEntries(t, dir) {
		if strings.HasPrefix(e, ".") {
			t.Errorf("temporary left behind: %s", e)
		}
	}
}

func mustEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestEmptyAndMalformedInput: an empty file, empty stdin and a graph without nodes are
// refused, as are node names TensorFlow rejects (issue 11 item 13).
func TestEmptyAndMalformedInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pb")
	os.WriteFile(empty, nil, 0o644)
	noNodes := filepath.Join(dir, "nonodes.pbtxt")
	os.WriteFile(noNodes, []byte("versions { producer: 1700 }\n"), 0o644)
	badName := filepath.Join(dir, "badname.pbtxt")
	os.WriteFile(badName, []byte("node { name: \"my input\" op: \"NoOp\" }\n"), 0o644)
	for _, tc := range []struct {
		args  []string
		stdin []byte
		want  string
	}{
		{[]string{"rewrite", empty}, nil, empty + ": is empty"},
		{[]string{"inspect", empty}, nil, empty + ": is empty"},
		{[]string{"simulate", empty, "--device", "v100-16gb"}, nil, empty + ": is empty"},
		{[]string{"rewrite", "-", "-o", "-"}, nil, "<stdin>: is empty"},
		{[]string{"inspect", "-"}, []byte{}, "<stdin>: is empty"},
		{[]string{"rewrite", noNodes}, nil, noNodes + ": the graph has no nodes"},
		{[]string{"simulate", safetyFixture, "--device", "v100-16gb", "--baseline", noNodes}, nil, "the graph has no nodes"},
		{[]string{"rewrite", badName}, nil, `node "my input": is not a name TensorFlow accepts`},
		{[]string{"inspect", badName}, nil, `node "my input"`},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"tfswap"}, tc.args...), bytes.NewReader(tc.stdin), &out, &errb)
		if code != exitBadInput || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 1 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
	if names := mustEntries(t, dir); len(names) != 3 {
		t.Errorf("outputs written for refused inputs: %v", names)
	}
}

// TestUserScopeNamedTfswap: a graph whose own name scope is "tfswap/" is rewritten; a graph
// tfswap rewrote is recognised by the _tfswap_id attribute of its nodes, whatever they are
// called (issue 11 item 13).
func TestUserScopeNamedTfswap(t *testing.T) {
	dir := t.TempDir()
	m, err := graphdef.Load(safetyFixture, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scoped := filepath.Join(dir, "scoped.pb")
	if err := renameNodes(m, func(n string) string { return "tfswap/" + n }).Save(scoped, graphdef.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.pb")
	code, stdout, stderr := runSimCLI(t, "rewrite", scoped, "-o", out, "--strategy", "lms-fixed")
	if code != 0 {
		t.Fatalf("a user scope named tfswap/: exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "tensors swapped: 0 ") {
		t.Fatalf("nothing swapped in the scoped graph:\n%s", stdout)
	}
	// The rewritten graph, with every node renamed out of the tfswap/ scope, is still
	// recognised as rewritten.
	rm, err := graphdef.Load(out, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(dir, "renamed.pb")
	if err := renameNodes(rm, func(n string) string { return "user/" + strings.TrimPrefix(n, "tfswap/") }).Save(renamed, graphdef.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runSimCLI(t, "rewrite", renamed, "-o", filepath.Join(dir, "again.pb"), "--strategy", "lms-fixed")
	if code != exitBadInput || !strings.Contains(stderr, "already rewritten") {
		t.Errorf("rewriting a rewritten graph: exit %d, %s", code, stderr)
	}
	g, err := graphdef.Load(renamed, graphdef.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Graph.Node {
		if strings.HasPrefix(n.GetName(), rewrite.Scope) {
			t.Fatalf("node %s kept the tfswap/ prefix", n.GetName())
		}
	}
}

// renameNodes returns m with every node renamed by f, inputs and colocation attrs following.
func renameNodes(m *graphdef.Model, f func(string) string) *graphdef.Model {
	c := m.Clone()
	for i, nd := range c.Graph.Node {
		cp := proto.Clone(nd).(*npb.NodeDef)
		cp.Name = f(cp.Name)
		for j, in := range cp.Input {
			prefix := ""
			if strings.HasPrefix(in, "^") {
				prefix, in = "^", in[1:]
			}
			cp.Input[j] = prefix + f(in)
		}
		if cl := cp.Attr["_class"].GetList(); cl != nil {
			for k, s := range cl.S {
				if name, ok := strings.CutPrefix(string(s), "loc:@"); ok {
					cl.S[k] = []byte("loc:@" + f(name))
				}
			}
		}
		c.Graph.Node[i] = cp
	}
	return c
}
