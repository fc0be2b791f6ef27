package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// runtimeCommands are the commands that run graphs in a TensorFlow session. A tfswap built
// without the TensorFlow runtime (haveRuntime false) runs them by executing tfswap-runtime
// as a child process (delegate), so that it never loads TensorFlow itself: not for --help,
// not for the pure commands.
var runtimeCommands = map[string]bool{"train": true, "profile": true, "tune": true, "gpu-check": true}

const (
	// runtimeBinaryName is the tfswap built with -tags tensorflow, looked for next to the
	// running tfswap.
	runtimeBinaryName = "tfswap-runtime"
	// runtimeEnv names another runtime binary to run.
	runtimeEnv = "TFSWAP_RUNTIME"
	// delegatedEnv is set in the runtime binary's environment, so that a runtime binary
	// built without the runtime does not run itself again.
	delegatedEnv = "TFSWAP_DELEGATED"
)

// runtimeBinary returns the path of the runtime binary: $TFSWAP_RUNTIME, else tfswap-runtime
// in the running executable's directory; "" when there is none.
func runtimeBinary() (string, error) {
	if p := os.Getenv(runtimeEnv); p != "" {
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("$%s=%s is not an executable file", runtimeEnv, p)
		}
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	p := filepath.Join(filepath.Dir(exe), runtimeBinaryName)
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return p, nil
	}
	return "", nil
}

// stderrTerminalEnv tells the runtime binary, whose stderr is the pipe of the log filter,
// that tfswap's stderr is a terminal (for profile's progress bar).
const stderrTerminalEnv = "TFSWAP_STDERR_TERMINAL"

// delegate runs the runtime binary with the same arguments, stdin and stdout, and returns its
// exit status; ran is false, with no error, when there is no runtime binary (the command's
// stub then says how to get one). SIGINT, SIGTERM, SIGHUP and SIGQUIT are passed on to it;
// when it dies of a signal, tfswap dies of the same one.
//
// TensorFlow's informational and warning log is kept off unless -v is given or
// TF_CPP_MIN_LOG_LEVEL asks for it (0 or 1): the runtime binary gets TF_CPP_MIN_LOG_LEVEL=2
// when the variable is not set (which silences the notices printed as the library loads), and
// its stderr is filtered of the log lines TensorFlow prints regardless of that variable (its
// absl-logged ones, such as the MLIR pass notice). Everything else on its stderr, errors and
// fatal messages included, is passed through.
func delegate(args []string) (code int, ran bool, err error) {
	if os.Getenv(delegatedEnv) != "" {
		return 0, false, nil
	}
	bin, err := runtimeBinary()
	if err != nil || bin == "" {
		return 0, false, err
	}
	env := append(os.Environ(), delegatedEnv+"=1")
	level, set := os.LookupEnv("TF_CPP_MIN_LOG_LEVEL")
	verbose := verboseArg(args)
	if !set && !verbose {
		env = append(env, "TF_CPP_MIN_LOG_LEVEL=2")
	}
	quiet := !verbose && level != "0" && level != "1"
	cmd := exec.Command(bin, args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	var filter *logFilter
	if quiet {
		filter = &logFilter{w: os.Stderr}
		cmd.Stderr = filter
		if isTerminal(os.Stderr) {
			env = append(env, stderrTerminalEnv+"=1")
		}
	}
	cmd.Env = env
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, false, fmt.Errorf("cannot run the TensorFlow runtime binary %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	close(done)
	if filter != nil {
		filter.Flush()
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		s := ws.Signal()
		signal.Reset(s)
		syscall.Kill(os.Getpid(), s)
		time.Sleep(100 * time.Millisecond)
		return 128 + int(s), true, nil
	}
	if cmd.ProcessState == nil {
		return 0, false, fmt.Errorf("running the TensorFlow runtime binary %s: %v", bin, err)
	}
	return cmd.ProcessState.ExitCode(), true, nil
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// tfLogLine matches the start of an informational or warning line of TensorFlow's log, in
// its own format ("2026-01-02 03:04:05.678901: I tensorflow/core/util/port.cc:153] ...") and
// in absl's ("I0000 00:00:1795452235.337003    5749 mlir_graph_optimization_pass.cc:401] ...",
// the seconds being those since the epoch when logging was not set up).
var tfLogLine = regexp.MustCompile(`^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IW] [^ \]]+:\d+\] |[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^ \]]+:\d+\] )`)

// abslPreamble is the line absl prints before its first message when logging was not set up.
const abslPreamble = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"

// logFilter passes what is written to it on to w, line by line (a line ends in '\n' or '\r'),
// except TensorFlow's informational and warning log lines (tfLogLine, abslPreamble). A
// partial line that cannot begin such a line (a progress bar) is passed on at once.
type logFilter struct {
	w       io.Writer
	pending []byte
}

func (f *logFilter) Write(p []byte) (int, error) {
	f.pending = append(f.pending, p...)
	for {
		i := bytes.IndexAny(f.pending, "\n\r")
		if i < 0 {
			break
		}
		line := f.pending[:i+1]
		if !isTFLog(line) {
			if _, err := f.w.Write(line); err != nil {
				return len(p), err
			}
		}
		f.pending = f.pending[i+1:]
	}
	if len(f.pending) > 0 && !mayStartTFLog(f.pending) {
		_, err := f.w.Write(f.pending)
		f.pending = nil
		return len(p), err
	}
	return len(p), nil
}

// Flush passes on a last line without an end.
func (f *logFilter) Flush() {
	if len(f.pending) > 0 && !isTFLog(f.pending) {
		f.w.Write(f.pending)
	}
	f.pending = nil
}

func isTFLog(line []byte) bool {
	return tfLogLine.Match(line) || bytes.HasPrefix(line, []byte(abslPreamble))
}

// mayStartTFLog reports whether the partial line b may still turn out to be a log line.
func mayStartTFLog(b []byte) bool {
	n := min(len(b), len(abslPreamble))
	if string(b[:n]) == abslPreamble[:n] {
		return true
	}
	c := b[0]
	return c >= '0' && c <= '9' || (c == 'I' || c == 'W') && (len(b) == 1 || b[1] >= '0' && b[1] <= '9')
}
