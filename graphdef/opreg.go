package graphdef

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	npb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tpb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
)

//go:embed opreg/ops.json
var opsJSON []byte

// opOutputArg is one output argument of an op, as TensorFlow's OpDef declares it.
type opOutputArg struct {
	Name         string `json:"name"`
	Type         string `json:"type"`
	TypeAttr     string `json:"type_attr"`
	NumberAttr   string `json:"number_attr"`
	TypeListAttr string `json:"type_list_attr"`
	IsRef        bool   `json:"is_ref"`
}

// opSignature is what tfswap keeps of an OpDef: its outputs and its attr defaults.
type opSignature struct {
	Outputs  []opOutputArg              `json:"outputs"`
	Defaults map[string]json.RawMessage `json:"defaults"`
	Stateful bool                       `json:"stateful"`
}

type opRegistry struct {
	TensorFlowVersion string                  `json:"tensorflow_version"`
	Ops               map[string]*opSignature `json:"ops"`
}

var (
	registryOnce sync.Once
	registry     *opRegistry
)

func ops() *opRegistry {
	registryOnce.Do(func() {
		registry = new(opRegistry)
		if err := json.Unmarshal(opsJSON, registry); err != nil {
			panic("graphdef: embedded op registry is corrupt: " + err.Error())
		}
	})
	return registry
}

// OpRegistryVersion returns the TensorFlow release the embedded op registry was read from.
func OpRegistryVersion() string { return ops().TensorFlowVersion }

// KnownOp reports whether op is registered in the embedded TensorFlow op registry.
func KnownOp(op string) bool {
	_, ok := ops().Ops[op]
	return ok
}

// IsStatefulOp reports whether TensorFlow registers op as stateful.
func IsStatefulOp(op string) bool {
	s, ok := ops().Ops[op]
	return ok && s.Stateful
}

// errUnknownOp is returned by outputTypes for ops missing from the registry (custom ops,
// functions called as ops); their outputs are not typed, and so never sized.
var errUnknownOp = fmt.Errorf("op is not in TensorFlow's op registry")

// outputTypes returns the dtypes of the outputs of node n, as its op's OpDef declares them
// and its attrs resolve them.
func outputTypes(n *npb.NodeDef) ([]DataType, error) {
	sig, ok := ops().Ops[n.GetOp()]
	if !ok {
		return nil, errUnknownOp
	}
	attr := n.GetAttr()
	var out []DataType
	for _, arg := range sig.Outputs {
		count := 1
		if arg.NumberAttr != "" {
			v, ok := attr[arg.NumberAttr]
			if ok {
				count = int(v.GetI())
			} else if raw, ok := sig.Defaults[arg.NumberAttr]; ok {
				var i int
				if err := json.Unmarshal(raw, &i); err != nil {
					return nil, fmt.Errorf("default of attr %q: %v", arg.NumberAttr, err)
				}
				count = i
			} else {
				return nil, fmt.Errorf("missing attr %q (the number of %q outputs)", arg.NumberAttr, arg.Name)
			}
			if count < 0 {
				return nil, fmt.Errorf("attr %q is negative", arg.NumberAttr)
			}
		}
		var types []DataType
		switch {
		case arg.Type != "":
			dt, ok := tpb.DataType_value[arg.Type]
			if !ok {
				return nil, fmt.Errorf("output %q has unknown dtype %s", arg.Name, arg.Type)
			}
			types = []DataType{DataType(dt)}
		case arg.TypeAttr != "":
			dt, err := typeAttr(attr, sig, arg.TypeAttr)
			if err != nil {
				return nil, err
			}
			types = []DataType{dt}
		case arg.TypeListAttr != "":
			v, ok := attr[arg.TypeListAttr]
			if ok {
				types = append(types, v.GetList().GetType()...)
			} else if raw, ok := sig.Defaults[arg.TypeListAttr]; ok {
				var names []string
				if err := json.Unmarshal(raw, &names); err != nil {
					return nil, fmt.Errorf("default of attr %q: %v", arg.TypeListAttr, err)
				}
				for _, name := range names {
					types = append(types, DataType(tpb.DataType_value[name]))
				}
			} else {
				return nil, fmt.Errorf("missing attr %q (the dtypes of %q outputs)", arg.TypeListAttr, arg.Name)
			}
		default:
			return nil, fmt.Errorf("output %q of op %s has no dtype in the registry", arg.Name, n.GetOp())
		}
		for i := 0; i < count; i++ {
			for _, dt := range types {
				if arg.IsRef && !IsRef(dt) {
					dt += refOffset
				}
				out = append(out, dt)
			}
		}
	}
	return out, nil
}

func typeAttr(attr map[string]*apb.AttrValue, sig *opSignature, name string) (DataType, error) {
	if v, ok := attr[name]; ok {
		if _, isType := v.GetValue().(*apb.AttrValue_Type); !isType {
			return 0, fmt.Errorf("attr %q is not a type", name)
		}
		return v.GetType(), nil
	}
	if raw, ok := sig.Defaults[name]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("default of attr %q: %v", name, err)
		}
		return DataType(tpb.DataType_value[s]), nil
	}
	return 0, fmt.Errorf("missing type attr %q", name)
}
