package graphdef

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	"google.golang.org/protobuf/proto"
)

// TestMain lets the signal tests run this test binary as the process that is interrupted
// (TestInterruptedWriteLeavesNothing).
func TestMain(m *testing.M) {
	if mode := os.Getenv("GRAPHDEF_TEST_INTERRUPT"); mode != "" {
		os.Exit(interruptedWriter(mode, os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// interruptedWriter writes out (a GraphDef file, or a SavedModel directory) and, once its
// temporary exists, prints the temporary's path and waits to be killed.
func interruptedWriter(mode, out string) int {
	testHookTempCreated = func(tmp string) {
		fmt.Println(tmp)
		time.Sleep(time.Minute)
	}
	var err error
	switch mode {
	case "file":
		err = WriteFileAtomic(out, bytes.Repeat([]byte("x"), 1<<20), 0o644)
	case "savedmodel":
		var m *Model
		if m, err = Load("testdata/tiny_savedmodel", LoadOptions{Tags: []string{"train"}}); err == nil {
			err = m.Save(out, SaveOptions{})
		}
	}
	fmt.Fprintln(os.Stderr, "the write was not interrupted:", err)
	return 0
}

// TestInterruptedWriteLeavesNothing interrupts a real process, with a real signal, while its
// temporary file or directory exists, and checks that the temporary is gone, the output was
// not created and the process died of the signal.
func TestInterruptedWriteLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		mode string
		sig  syscall.Signal
	}{{"file", syscall.SIGTERM}, {"file", syscall.SIGINT}, {"savedmodel", syscall.SIGTERM}, {"savedmodel", syscall.SIGINT}} {
		t.Run(fmt.Sprintf("%s/%v", tc.mode, tc.sig), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.pb")
			if tc.mode == "savedmodel" {
				out = filepath.Join(dir, "out")
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$", out)
			cmd.Env = append(os.Environ(), "GRAPHDEF_TEST_INTERRUPT="+tc.mode)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no temporary reported: %v; stderr %s", err, stderr.String())
			}
			tmp := strings.TrimSpace(line)
			if _, err := os.Stat(tmp); err != nil || filepath.Dir(tmp) != dir {
				t.Fatalf("temporary %q: %v (want it in %s)", tmp, err, dir)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("the process exited normally after %v: %v; stderr %s", tc.sig, err, stderr.String())
			}
			if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != tc.sig {
				t.Errorf("exit %v, want death by %v", ee, tc.sig)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("left behind in the output directory: %v", names)
			}
		})
	}
}

// TestWriteFileOutputRules checks the output rules of WriteFileAtomic on each kind of path.
func TestWriteFileOutputRules(t *testing.T) {
	dir := t.TempDir()
	data := []byte("new contents")
	var oe *OutputError

	// A new path is created; an existing regular file is replaced and keeps its mode.
	fresh := filepath.Join(dir, "fresh.pb")
	if err := WriteFileAtomic(fresh, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(fresh); !bytes.Equal(b, data) {
		t.Errorf("new file holds %q", b)
	}
	private := filepath.Join(dir, "private.pb")
	os.WriteFile(private, []byte("old"), 0o600)
	if err := WriteFileAtomic(private, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(private); st.Mode().Perm() != 0o600 {
		t.Errorf("replaced file has mode %v, want its own 0600", st.Mode().Perm())
	}

	// A symbolic link: its target is written, the link kept; a dangling link's target is
	// created.
	target := filepath.Join(dir, "target.pb")
	os.WriteFile(target, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.pb")
	if err := os.Symlink("target.pb", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(link, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(link); st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a %v", st.Mode().Type())
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, data) {
		t.Errorf("link target holds %q", b)
	}
	dangling := filepath.Join(dir, "dangling.pb")
	os.Symlink("created.pb", dangling)
	if err := WriteFileAtomic(dangling, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "created.pb")); !bytes.Equal(b, data) {
		t.Errorf("dangling link's target holds %q", b)
	}
	if st, _ := os.Lstat(dangling); st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the dangling link was replaced")
	}

	// A FIFO is written through and stays a FIFO.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		got <- b
	}()
	if err := WriteFileAtomic(fifo, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Errorf("read %q from the FIFO", b)
	}
	if st, _ := os.Lstat(fifo); st.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced by a %v", st.Mode().Type())
	}

	// /dev/null, a character device, is written through and is still one afterwards.
	if err := WriteFileAtomic(os.DevNull, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(os.DevNull); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device: %v %v", os.DevNull, st.Mode(), err)
	}

	// A directory and a socket are refused, untouched.
	sub := filepath.Join(dir, "subdir")
	os.Mkdir(sub, 0o755)
	if err := WriteFileAtomic(sub, data, 0o644); !errors.As(err, &oe) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	if st, err := os.Stat(sub); err != nil || !st.IsDir() {
		t.Errorf("the directory was replaced")
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := WriteFileAtomic(sock, data, 0o644); !errors.As(err, &oe) || !strings.Contains(err.Error(), "socket") {
		t.Errorf("socket: %v", err)
	}
	if st, _ := os.Lstat(sock); st.Mode()&fs.ModeSocket == 0 {
		t.Errorf("the socket was replaced")
	}
	if err := WriteFileAtomic("", data, 0o644); !errors.As(err, &oe) {
		t.Errorf("empty path: %v", err)
	}

	// No temporary is left anywhere.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary left behind: %s", e.Name())
		}
	}
}

// TestSavedModelOutputRules checks where a SavedModel may be written: a new or an empty
// directory, never over files, never into the input's parent or inside the input.
func TestSavedModelOutputRules(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "model")
	os.Mkdir(in, 0o755)
	if err := copyTree("testdata/tiny_savedmodel", in, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	orig := snapshot(t, dir)
	m, err := Load(in, LoadOptions{Tags: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	var oe *OutputError
	refused := func(name, out, want string) {
		t.Helper()
		before := snapshot(t, dir)
		err := m.Save(out, SaveOptions{})
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an *OutputError saying %q", name, err, want)
		}
		if after := snapshot(t, dir); after != before {
			t.Errorf("%s: the refused save changed files:\nbefore %s\nafter  %s", name, before, after)
		}
	}

	// The input's parent directory: it holds the input, so it is not empty, and it contains
	// the input.
	refused("input's parent", dir, "contains the input SavedModel")
	refused("inside the input", filepath.Join(in, "variables", "copy"), "lies inside the input SavedModel")
	busy := filepath.Join(dir, "busy")
	os.Mkdir(busy, 0o755)
	os.WriteFile(filepath.Join(busy, "notes.txt"), []byte("mine"), 0o644)
	refused("a non-empty directory", busy, "not empty")
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("mine"), 0o644)
	refused("a file", file, "not a directory")
	if b, _ := os.ReadFile(filepath.Join(busy, "notes.txt")); string(b) != "mine" {
		t.Errorf("the user's file in %s was lost", busy)
	}

	// A new directory and an empty one are written.
	for _, out := range []string{filepath.Join(dir, "new"), filepath.Join(dir, "empty")} {
		if filepath.Base(out) == "empty" {
			os.Mkdir(out, 0o755)
		}
		if err := m.Save(out, SaveOptions{}); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if _, err := os.Stat(filepath.Join(out, "variables", "variables.index")); err != nil {
			t.Errorf("%s: variables not copied: %v", out, err)
		}
	}
	// In place, only saved_model.pb changes.
	c := m.Clone()
	nd := proto.Clone(c.Graph.Node[0]).(*npb.NodeDef)
	nd.Device = "/device:CPU:0"
	c.Graph.Node[0] = nd
	if err := c.Save(in, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"variables/variables.index", "variables/variables.data-00000-of-00001"} {
		a, _ := os.ReadFile(filepath.Join("testdata/tiny_savedmodel", f))
		b, _ := os.ReadFile(filepath.Join(in, f))
		if !bytes.Equal(a, b) {
			t.Errorf("in place: %s changed", f)
		}
	}
	if snapshot(t, in) == orig {
		t.Errorf("in place: nothing was written")
	}
	for _, e := range mustReadDir(t, dir) {
		if strings.HasPrefix(e, ".") {
			t.Errorf("temporary left behind: %s", e)
		}
	}
}

// snapshot lists the files under dir with their sizes and contents' lengths, to tell whether
// anything changed.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		data := []byte{}
		if d.Type().IsRegular() {
			data, _ = os.ReadFile(p)
		}
		fmt.Fprintf(&b, "%s:%v:%x ", p, d.Type(), data)
		return nil
	})
	return b.String()
}

func mustReadDir(t *testing.T, dir string) []string {
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

// TestGraphOverProtobufLimit lowers the 2 GiB limit and checks that a graph over it is
// refused, in every format, before anything is written.
func TestGraphOverProtobufLimit(t *testing.T) {
	m, err := Load(filepath.Join(fixtures, "mlp.pb"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { maxProtoBytes = n }(maxProtoBytes)
	maxProtoBytes = len(data) - 1
	dir := t.TempDir()
	for _, name := range []string{"big.pb", "big.pbtxt"} {
		err := m.Save(filepath.Join(dir, name), SaveOptions{})
		if err == nil || !strings.Contains(err.Error(), "over protobuf's limit") || !strings.Contains(err.Error(), "SavedModel") {
			t.Errorf("%s: %v", name, err)
		}
	}
	sm, err := Load("testdata/tiny_savedmodel", LoadOptions{Tags: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}
	maxProtoBytes = 100
	if err := sm.Save(filepath.Join(dir, "sm"), SaveOptions{}); err == nil || !strings.Contains(err.Error(), "over protobuf's limit") {
		t.Errorf("SavedModel: %v", err)
	}
	if names := mustReadDir(t, dir); len(names) != 0 {
		t.Errorf("written despite the limit: %v", names)
	}
	maxProtoBytes = len(data)
	if _, err := m.Marshal(); err != nil {
		t.Errorf("a graph of exactly the limit: %v", err)
	}
}

// TestEmptyInputRefused checks that an empty file is not read as a graph with no nodes.
func TestEmptyInputRefused(t *testing.T) {
	for _, name := range []string{"empty.pb", "empty.pbtxt"} {
		path := filepath.Join(t.TempDir(), name)
		os.WriteFile(path, nil, 0o644)
		_, err := Load(path, LoadOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), "is empty") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Parse(nil, FormatPB, "<stdin>"); err == nil || err.Error() != "<stdin>: is empty: no graph to read" {
		t.Errorf("empty stdin: %v", err)
	}
}

// TestValidNodeName checks the node-name rule against TensorFlow's (node_def_util.cc).
func TestValidNodeName(t *testing.T) {
	for _, ok := range []string{"a", "A9", ".x", "0", "dense/MatMul", "a-b_c.d/e", "tfswap/x_0/swap_out", "a>b", "a>.b/c", "x"} {
		if !ValidNodeName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "_a", "-a", "/a", "a b", "a\nb", "a:0", "^a", ">a", "a>", "a>>b", "a>_b", "é", "a\x00"} {
		if ValidNodeName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestResolvedPaths checks that paths are compared as the files they name.
func TestResolvedPaths(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.pb")
	os.WriteFile(a, []byte("x"), 0o644)
	os.Symlink("a.pb", filepath.Join(dir, "link.pb"))
	os.Link(a, filepath.Join(dir, "hard.pb"))
	os.Symlink(dir, filepath.Join(dir, "self"))
	os.Symlink("later.pb", filepath.Join(dir, "dangling"))
	same := [][2]string{
		{a, filepath.Join(dir, "link.pb")},
		{a, filepath.Join(dir, "hard.pb")},
		{a, filepath.Join(dir, "self", "a.pb")},
		{filepath.Join(dir, "new.pb"), filepath.Join(dir, "self", "new.pb")},
		{filepath.Join(dir, "dangling"), filepath.Join(dir, "later.pb")},
		{filepath.Join(dir, "x", "..", "new.pb"), filepath.Join(dir, "new.pb")},
	}
	for _, p := range same {
		if !SamePath(p[0], p[1]) {
			t.Errorf("%s and %s not the same", p[0], p[1])
		}
	}
	if SamePath(a, filepath.Join(dir, "new.pb")) {
		t.Errorf("different files compared the same")
	}
	if !Within(filepath.Join(dir, "self", "sub", "f"), dir) || Within(dir, filepath.Join(dir, "sub")) || Within(dir+"x", dir) {
		t.Errorf("Within is wrong")
	}
}
