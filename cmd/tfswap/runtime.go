package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// runtimeCommands are the commands that run graphs in a TensorFlow session. A tfswap built
// without the TensorFlow runtime (haveRuntime false) runs them by executing tfswap-runtime
// in its place (delegate), so that it never loads TensorFlow itself: not for --help, not for
// the pure commands.
var runtimeCommands = map[string]bool{"train": true, "profile": true, "tune": true}

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

// delegate replaces the process with the runtime binary, run with the same arguments. It
// returns nil without doing anything when there is no runtime binary (the command's stub then
// says how to get one), and an error when it cannot run it. TensorFlow's informational log
// (the oneDNN notice and the like) is silenced with TF_CPP_MIN_LOG_LEVEL=2 unless -v is given
// or the variable is set already.
func delegate(args []string) error {
	if os.Getenv(delegatedEnv) != "" {
		return nil
	}
	bin, err := runtimeBinary()
	if err != nil || bin == "" {
		return err
	}
	env := append(os.Environ(), delegatedEnv+"=1")
	if _, set := os.LookupEnv("TF_CPP_MIN_LOG_LEVEL"); !set && !verboseArg(args) {
		env = append(env, "TF_CPP_MIN_LOG_LEVEL=2")
	}
	argv := append([]string{bin}, args[1:]...)
	if err := syscall.Exec(bin, argv, env); err != nil {
		return fmt.Errorf("cannot run the TensorFlow runtime binary %s: %v", bin, err)
	}
	return nil
}
