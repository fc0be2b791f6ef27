package graphdef

import (
	"fmt"
	"strconv"
	"strings"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	fpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	gpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
)

// FunctionCalls maps the op types that call functions of the graph's library to the attrs
// naming the functions they may run: a call runs its "f", an If one of its branches, a While
// its cond and body, a Case one of its branches.
var FunctionCalls = map[string][]string{
	"PartitionedCall": {"f"}, "StatefulPartitionedCall": {"f"},
	"If": {"then_branch", "else_branch"}, "StatelessIf": {"then_branch", "else_branch"},
	"While": {"cond", "body"}, "StatelessWhile": {"cond", "body"},
	"Case": {"branches"}, "StatelessCase": {"branches"},
}

// CalledFunctions returns the names of the library functions node n calls, per attr of
// FunctionCalls (a Case's branches in order); for a node whose op is itself a function of
// lib (a direct call), that function under the attr "". It returns nil for other nodes.
func CalledFunctions(n *npb.NodeDef, lib *fpb.FunctionDefLibrary) map[string][]string {
	if attrs, ok := FunctionCalls[n.GetOp()]; ok {
		out := map[string][]string{}
		for _, a := range attrs {
			v := n.GetAttr()[a]
			if v == nil {
				continue
			}
			if f := v.GetFunc(); f != nil {
				out[a] = append(out[a], f.GetName())
			}
			for _, f := range v.GetList().GetFunc() {
				out[a] = append(out[a], f.GetName())
			}
		}
		return out
	}
	if findFunction(lib, n.GetOp()) != nil {
		return map[string][]string{"": {n.GetOp()}}
	}
	return nil
}

func findFunction(lib *fpb.FunctionDefLibrary, name string) *fpb.FunctionDef {
	for _, f := range lib.GetFunction() {
		if f.GetSignature().GetName() == name {
			return f
		}
	}
	return nil
}

// RetvalPrefix starts the names of the nodes FunctionGraph adds for a function's results.
const RetvalPrefix = "tfswap_retval/"

// FunctionGraph builds a Graph of the body of the function name in lib, for costing a call
// of it: one _Arg node per input argument (named after the argument, with the shape the
// function's arg_attr records), the body's nodes with their inputs rewritten from the
// FunctionDef's "node:output_arg:index" form to "node:port", and one Identity per output
// argument (RetvalPrefix + NAME) reading what the function returns. The Graph's Def carries lib,
// so that calls in the body can be costed in turn. Errors name the function.
func FunctionGraph(lib *fpb.FunctionDefLibrary, name string) (*Graph, error) {
	f := findFunction(lib, name)
	if f == nil {
		return nil, fmt.Errorf("function %q is not in the graph's library", name)
	}
	src := "function " + name
	sig := f.GetSignature()
	def := &gpb.GraphDef{Library: lib}
	args := map[string]bool{}
	for i, a := range sig.GetInputArg() {
		attr := map[string]*apb.AttrValue{
			"T":     {Value: &apb.AttrValue_Type{Type: a.GetType()}},
			"index": {Value: &apb.AttrValue_I{I: int64(i)}},
		}
		if aa := f.GetArgAttr()[uint32(i)]; aa != nil {
			if s, ok := aa.GetAttr()["_output_shapes"]; ok {
				attr["_output_shapes"] = s
			}
		}
		if a.GetTypeAttr() != "" || a.GetNumberAttr() != "" || a.GetTypeListAttr() != "" {
			return nil, fmt.Errorf("%s: input %q is polymorphic (an uninstantiated function)", src, a.GetName())
		}
		args[a.GetName()] = true
		def.Node = append(def.Node, &npb.NodeDef{Name: a.GetName(), Op: "_Arg", Attr: attr})
	}
	byName := map[string]*npb.NodeDef{}
	for _, nd := range f.GetNodeDef() {
		byName[nd.GetName()] = nd
	}
	translate := func(in string) (string, error) {
		if strings.HasPrefix(in, "^") || args[in] {
			return in, nil
		}
		parts := strings.Split(in, ":")
		if len(parts) == 1 {
			return in, nil // a node's first output, as in a GraphDef
		}
		if len(parts) != 3 {
			return "", fmt.Errorf("input %q is not node:output:index", in)
		}
		p := byName[parts[0]]
		if p == nil {
			return "", fmt.Errorf("input %q names no node of the function", in)
		}
		idx, err := strconv.Atoi(parts[2])
		if err != nil || idx < 0 {
			return "", fmt.Errorf("input %q: bad index", in)
		}
		off, err := outputArgOffset(p, parts[1], lib)
		if err != nil {
			return "", fmt.Errorf("input %q: %v", in, err)
		}
		return parts[0] + ":" + strconv.Itoa(off+idx), nil
	}
	for _, nd := range f.GetNodeDef() {
		if args[nd.GetName()] {
			return nil, fmt.Errorf("%s: node %q has the name of an input argument", src, nd.GetName())
		}
		c := &npb.NodeDef{Name: nd.GetName(), Op: nd.GetOp(), Device: nd.GetDevice(), Attr: nd.GetAttr()}
		for _, in := range nd.GetInput() {
			t, err := translate(in)
			if err != nil {
				return nil, &Error{File: src, Node: nd.GetName(), Err: err}
			}
			c.Input = append(c.Input, t)
		}
		def.Node = append(def.Node, c)
	}
	for _, o := range sig.GetOutputArg() {
		ret, ok := f.GetRet()[o.GetName()]
		if !ok {
			return nil, fmt.Errorf("%s: output %q is not returned", src, o.GetName())
		}
		t, err := translate(ret)
		if err != nil {
			return nil, fmt.Errorf("%s: output %q: %v", src, o.GetName(), err)
		}
		if byName[RetvalPrefix+o.GetName()] != nil {
			return nil, fmt.Errorf("%s: node %q has the name tfswap gives result %q", src, RetvalPrefix+o.GetName(), o.GetName())
		}
		def.Node = append(def.Node, &npb.NodeDef{Name: RetvalPrefix + o.GetName(), Op: "Identity", Input: []string{t},
			Attr: map[string]*apb.AttrValue{"T": {Value: &apb.AttrValue_Type{Type: o.GetType()}}}})
	}
	return NewGraph(def, src)
}

// outputArgOffset returns the first port of node nd's output argument arg: the outputs of
// the arguments before it, as its op's OpDef (or, for a direct call, its function's
// signature) declares them and its attrs size them.
func outputArgOffset(nd *npb.NodeDef, arg string, lib *fpb.FunctionDefLibrary) (int, error) {
	if f := findFunction(lib, nd.GetOp()); f != nil {
		for i, o := range f.GetSignature().GetOutputArg() {
			if o.GetName() == arg {
				return i, nil
			}
		}
		return 0, fmt.Errorf("function %s has no output %q", nd.GetOp(), arg)
	}
	sig, ok := ops().Ops[nd.GetOp()]
	if !ok {
		return 0, fmt.Errorf("op %s is not in TensorFlow's op registry", nd.GetOp())
	}
	off := 0
	for _, o := range sig.Outputs {
		if o.Name == arg {
			return off, nil
		}
		n := 1
		switch {
		case o.NumberAttr != "":
			v, ok := nd.GetAttr()[o.NumberAttr]
			if !ok {
				return 0, fmt.Errorf("missing attr %q", o.NumberAttr)
			}
			n = int(v.GetI())
		case o.TypeListAttr != "":
			v, ok := nd.GetAttr()[o.TypeListAttr]
			if !ok {
				return 0, fmt.Errorf("missing attr %q", o.TypeListAttr)
			}
			n = len(v.GetList().GetType())
		}
		off += n
	}
	return 0, fmt.Errorf("op %s has no output %q", nd.GetOp(), arg)
}
