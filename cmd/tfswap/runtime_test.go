package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	pureOnce sync.Once
	pureBin  string
	pureErr  error
)

// pureBinary builds tfswap without cgo, as make setup builds bin/tfswap, once per test
// process (removed by TestMain).
func pureBinary(t *testing.T) string {
	t.Helper()
	pureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tfswap-pure-")
		if err != nil {
			pureErr = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		pureBin = filepath.Join(dir, "tfswap")
		cmd := exec.Command("go", "build", "-o", pureBin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			pureErr = errors.New(err.Error() + "\n" + string(out))
		}
	})
	if pureErr != nil {
		t.Fatalf("building tfswap with CGO_ENABLED=0: %v", pureErr)
	}
	return pureBin
}

// cleanups run after the tests (TestMain).
var cleanups []func()

// installBinary copies the binary at src into dir as name.
func installBinary(t *testing.T, src, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// cleanEnv is the environment without the variables the delegation reads.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case runtimeEnv, delegatedEnv, "TF_CPP_MIN_LOG_LEVEL", "TFSWAP_TEST_MAIN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func runBinary(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
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

// TestPureBinaryDoesNotLoadTensorFlow: tfswap built as bin/tfswap is (CGO_ENABLED=0) links
// no shared library at all, so neither --help nor a pure command can load TensorFlow, and
// prints nothing on stderr for --help (issue 11 item 14).
func TestPureBinaryDoesNotLoadTensorFlow(t *testing.T) {
	bin := pureBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	libs, _ := f.ImportedLibraries()
	f.Close()
	if len(libs) != 0 {
		t.Errorf("the pure binary needs shared libraries: %v", libs)
	}
	code, stdout, stderr := runBinary(t, bin, cleanEnv(), "--help")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "rewrite") {
		t.Errorf("--help: exit %d, stderr %q", code, stderr)
	}
}

// fakeRuntime is a tfswap-runtime that records its arguments and TF_CPP_MIN_LOG_LEVEL in
// FILE.args and exits 7.
const fakeRuntime = `#!/bin/sh
{ printf '%s\n' "$@"; echo "TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL-unset}"; } > "$0.args"
exit 7
`

// TestRuntimeCommandsDelegate: built without the runtime, tfswap runs train, profile and
// tune with tfswap-runtime beside it (or $TFSWAP_RUNTIME) with the very same
// arguments, TensorFlow's log silenced unless -v; the other commands never do.
func TestRuntimeCommandsDelegate(t *testing.T) {
	dir := t.TempDir()
	bin := installBinary(t, pureBinary(t), dir, "tfswap")
	rt := filepath.Join(dir, runtimeBinaryName)
	if err := os.WriteFile(rt, []byte(fakeRuntime), 0o755); err != nil {
		t.Fatal(err)
	}
	recorded := func() string {
		t.Helper()
		b, err := os.ReadFile(rt + ".args")
		if err != nil {
			return "(not run)"
		}
		os.Remove(rt + ".args")
		return string(b)
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"profile", "m.pb", "-o", "m.profile", "--iterations", "2"}, "profile\nm.pb\n-o\nm.profile\n--iterations\n2\nTF_CPP_MIN_LOG_LEVEL=2\n"},
		{nil, []string{"tune", "m.pb", "--budget", "1GiB", "--", "-x"}, "tune\nm.pb\n--budget\n1GiB\n--\n-x\nTF_CPP_MIN_LOG_LEVEL=2\n"},
		{nil, []string{"-v", "train", "--fixture", "f.json", "a.pb"}, "-v\ntrain\n--fixture\nf.json\na.pb\nTF_CPP_MIN_LOG_LEVEL=unset\n"},
		{nil, []string{"train", "a.pb", "--verbose"}, "train\na.pb\n--verbose\nTF_CPP_MIN_LOG_LEVEL=unset\n"},
		{[]string{"TF_CPP_MIN_LOG_LEVEL=0"}, []string{"train", "a.pb"}, "train\na.pb\nTF_CPP_MIN_LOG_LEVEL=0\n"},
	} {
		code, _, stderr := runBinary(t, bin, cleanEnv(tc.env...), tc.args...)
		if got := recorded(); code != 7 || got != tc.want {
			t.Errorf("%q: exit %d (stderr %q), the runtime got\n%s\nwant\n%s", tc.args, code, stderr, got, tc.want)
		}
	}
	// The pure commands run in tfswap itself.
	if code, _, stderr := runBinary(t, bin, cleanEnv(), "inspect", safetyFixture, "--top", "1"); code != 0 || recorded() != "(not run)" {
		t.Errorf("inspect: exit %d %s, or delegated", code, stderr)
	}
	// Through a symbolic link to tfswap (installed on PATH, say), the runtime beside the
	// real binary is found.
	elsewhere := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(elsewhere, "tfswap")); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runBinary(t, filepath.Join(elsewhere, "tfswap"), cleanEnv(), "profile", "x.pb"); code != 7 || recorded() == "(not run)" {
		t.Errorf("through a link: exit %d", code)
	}
	// $TFSWAP_RUNTIME names another one; a wrong one is an error naming it.
	other := filepath.Join(t.TempDir(), "my-runtime")
	os.WriteFile(other, []byte(fakeRuntime), 0o755)
	if code, _, _ := runBinary(t, bin, cleanEnv(runtimeEnv+"="+other), "profile", "x.pb"); code != 7 {
		t.Errorf("$%s: exit %d", runtimeEnv, code)
	}
	if b, err := os.ReadFile(other + ".args"); err != nil || !strings.HasPrefix(string(b), "profile\nx.pb\n") {
		t.Errorf("$%s was not run: %q %v", runtimeEnv, b, err)
	}
	missing := filepath.Join(dir, "nonexistent")
	if code, _, stderr := runBinary(t, bin, cleanEnv(runtimeEnv+"="+missing), "profile", "x.pb"); code != 1 || !strings.Contains(stderr, missing+" is not an executable file") {
		t.Errorf("missing $%s: exit %d %q", runtimeEnv, code, stderr)
	}
	// Without a runtime binary, the command says how to get one.
	alone := installBinary(t, bin, t.TempDir(), "tfswap")
	for _, cmd := range []string{"train", "profile", "tune"} {
		code, _, stderr := runBinary(t, alone, cleanEnv(), cmd, "m.pb")
		if code != 1 || !strings.Contains(stderr, "built without the TensorFlow runtime") || !strings.Contains(stderr, "make setup") {
			t.Errorf("%s without a runtime: exit %d %q", cmd, code, stderr)
		}
	}
}

// TestLogFilter checks what the filter of the runtime binary's stderr drops: TensorFlow's
// informational and warning lines in both its formats and absl's preamble, and nothing else;
// a progress bar's partial lines pass at once.
func TestLogFilter(t *testing.T) {
	var out bytes.Buffer
	f := &logFilter{w: &out}
	in := []string{
		"2026-11-23 16:32:47.785441: I tensorflow/core/util/port.cc:153] oneDNN custom operations are on.\n",
		abslPreamble + "\n",
		"I0000 00:00:1795452235.337003    5749 mlir_graph_optimization_pass.cc:401] MLIR V1 optimization pass is not enabled\n",
		"W0000 00:00:1795452235.337003    5749 some_pass.cc:12] a warning\n",
		"E0000 00:00:1795452235.337003    5749 session.cc:99] an error stays\n",
		"2026-11-23 16:32:47.785441: F tensorflow/core/framework/tensor.cc:1] Check failed: stays\n",
		"tfswap: warning: TensorFlow's oneDNN optimizations are on\n",
		"2024 steps were run\n",
		"Iterations: 3\n",
	}
	for _, line := range in {
		// In two pieces, as a pipe may deliver them.
		f.Write([]byte(line[:len(line)/2]))
		f.Write([]byte(line[len(line)/2:]))
	}
	want := in[4] + in[5] + in[6] + in[7] + in[8]
	if out.String() != want {
		t.Errorf("filtered:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	f.Write([]byte("\rprofile   [###   ] 3/20  elapsed 1s  ETA 5s   "))
	if out.String() != "\rprofile   [###   ] 3/20  elapsed 1s  ETA 5s   " {
		t.Errorf("a progress bar's line was held back: %q", out.String())
	}
	f.Write([]byte("I0000 00:00:1.2 3 x.cc:1] partial"))
	f.Flush()
	if strings.Contains(out.String(), "partial") {
		t.Errorf("an unfinished log line passed: %q", out.String())
	}
}

// noisyRuntime is a tfswap-runtime that logs as TensorFlow does, then writes its own lines.
const noisyRuntime = `#!/bin/sh
echo "2026-11-23 16:32:47.785441: I tensorflow/core/util/port.cc:153] oneDNN custom operations are on." >&2
echo "` + abslPreamble + `" >&2
echo "I0000 00:00:1795452235.337003    5749 mlir_graph_optimization_pass.cc:401] MLIR V1 optimization pass is not enabled" >&2
echo "E0000 00:00:1795452235.337003    5749 session.cc:99] an error" >&2
echo "tfswap: its own message" >&2
echo "the result"
exit 3
`

// TestRuntimeLogSilenced: the runtime binary's TensorFlow log lines are dropped unless -v
// or TF_CPP_MIN_LOG_LEVEL asks for them; errors, its own messages, stdout and its exit status
// pass.
func TestRuntimeLogSilenced(t *testing.T) {
	dir := t.TempDir()
	bin := installBinary(t, pureBinary(t), dir, "tfswap")
	os.WriteFile(filepath.Join(dir, runtimeBinaryName), []byte(noisyRuntime), 0o755)
	for _, tc := range []struct {
		env   []string
		args  []string
		noisy bool
	}{
		{nil, []string{"train", "x.pb"}, false},
		{[]string{"TF_CPP_MIN_LOG_LEVEL=2"}, []string{"train", "x.pb"}, false},
		{nil, []string{"train", "x.pb", "-v"}, true},
		{[]string{"TF_CPP_MIN_LOG_LEVEL=0"}, []string{"profile", "x.pb"}, true},
	} {
		code, stdout, stderr := runBinary(t, bin, cleanEnv(tc.env...), tc.args...)
		if code != 3 || stdout != "the result\n" || !strings.Contains(stderr, "] an error\n") || !strings.Contains(stderr, "tfswap: its own message\n") {
			t.Errorf("%v %q: exit %d, stdout %q, stderr %q", tc.env, tc.args, code, stdout, stderr)
		}
		for _, noise := range []string{"oneDNN custom operations", abslPreamble, "MLIR V1"} {
			if strings.Contains(stderr, noise) != tc.noisy {
				t.Errorf("%v %q: %q shown %v, want %v:\n%s", tc.env, tc.args, noise, !tc.noisy, tc.noisy, stderr)
			}
		}
	}
}

// TestRuntimeSignals: a signal sent to tfswap reaches the runtime binary, and tfswap ends as
// the runtime binary does: with its exit status, or killed by the same signal.
func TestRuntimeSignals(t *testing.T) {
	dir := t.TempDir()
	bin := installBinary(t, pureBinary(t), dir, "tfswap")
	rt := filepath.Join(dir, runtimeBinaryName)
	// Handles SIGTERM itself (exit 42); dies of SIGINT.
	os.WriteFile(rt, []byte("#!/bin/sh\ntrap 'echo got TERM >&2; exit 42' TERM\necho ready\nwhile :; do sleep 0.05; done\n"), 0o755)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin, "train", "x.pb")
		cmd.Env = cleanEnv()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			t.Fatalf("runtime not started: %q %v", line, err)
		}
		cmd.Process.Signal(sig)
		err = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch sig {
		case syscall.SIGTERM:
			if ws.ExitStatus() != 42 || !strings.Contains(stderr.String(), "got TERM") {
				t.Errorf("SIGTERM: %v, stderr %q; want exit 42 from the runtime's handler", err, stderr.String())
			}
		case syscall.SIGINT:
			if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
				t.Errorf("SIGINT: %v; want death by SIGINT, as the runtime", err)
			}
		}
	}
}
