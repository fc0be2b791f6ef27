//go:build tensorflow

package tfrun

/*
// tensorflow::IsMKLEnabled(), exported by libtensorflow_framework.so.2, called by its
// mangled name: a C++ function without arguments returning bool has the C calling
// convention of a C function returning _Bool.
extern _Bool _ZN10tensorflow12IsMKLEnabledEv(void);
*/
import "C"

import (
	"fmt"
	"os"
	"syscall"
)

// OneDNNEnv is the environment variable that switches TensorFlow's oneDNN optimizations.
const OneDNNEnv = "TF_ENABLE_ONEDNN_OPTS"

// OneDNNEnabled reports whether TensorFlow, in this process, uses its oneDNN graph rewrites
// and kernels (tensorflow::IsMKLEnabled). TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, while
// the library is loaded, before any Go code runs: setting the variable with os.Setenv has no
// effect on the current process. See ReexecWithOneDNNOff.
func OneDNNEnabled() bool { return bool(C._ZN10tensorflow12IsMKLEnabledEv()) }

// ReexecWithOneDNNOff makes sure the process runs with TensorFlow's oneDNN optimizations
// off, so that bit-exact comparisons compare TensorFlow's plain Eigen kernels. With oneDNN
// on, the results of the fixtures change (cnn, resnet and lstm train to different bits), and
// oneDNN's graph pass picks kernels and fusions from the shape of the graph, which a rewrite
// changes; with it off, the arithmetic depends only on the ops and the intra-op thread count.
// When TF_ENABLE_ONEDNN_OPTS is unset, it sets it to 0 and re-executes the running program
// with the same arguments (it does not return then). When the variable is set, it returns nil
// and leaves the choice to the caller. It fails when TF_ENABLE_ONEDNN_OPTS=0 but oneDNN is on
// all the same, or when the program cannot be re-executed.
func ReexecWithOneDNNOff() error {
	if _, set := os.LookupEnv(OneDNNEnv); set {
		if os.Getenv(OneDNNEnv) == "0" && OneDNNEnabled() {
			return fmt.Errorf("tfrun: %s=0 is set but TensorFlow's oneDNN optimizations are on", OneDNNEnv)
		}
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("tfrun: re-exec with %s=0: %w", OneDNNEnv, err)
	}
	env := append(os.Environ(), OneDNNEnv+"=0")
	err = syscall.Exec(exe, os.Args, env)
	return fmt.Errorf("tfrun: re-exec %s with %s=0: %w", exe, OneDNNEnv, err)
}
