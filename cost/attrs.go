package cost

import (
	"github.com/tfswap/tfswap/graphdef"
	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
)

func attr(n *graphdef.Node, name string) *apb.AttrValue { return n.Def.GetAttr()[name] }

func attrBool(n *graphdef.Node, name string) bool { return attr(n, name).GetB() }

func attrString(n *graphdef.Node, name, def string) string {
	if v := attr(n, name); v != nil {
		if _, ok := v.GetValue().(*apb.AttrValue_S); ok {
			return string(v.GetS())
		}
	}
	return def
}

func attrInts(n *graphdef.Node, name string) []int64 { return attr(n, name).GetList().GetI() }

func attrInt(n *graphdef.Node, name string, def int64) int64 {
	if v := attr(n, name); v != nil {
		if _, ok := v.GetValue().(*apb.AttrValue_I); ok {
			return v.GetI()
		}
	}
	return def
}

// attrType returns a type attr, and false when it is missing.
func attrType(n *graphdef.Node, name string) (graphdef.DataType, bool) {
	if v := attr(n, name); v != nil {
		if t, ok := v.GetValue().(*apb.AttrValue_Type); ok {
			return t.Type, true
		}
	}
	return 0, false
}

// attrShape returns a shape attr's dimensions; ok is false when it is missing or of unknown
// rank. Unknown dimensions are -1.
func attrShape(n *graphdef.Node, name string) ([]int64, bool) {
	v := attr(n, name)
	sp := v.GetShape()
	if sp == nil || sp.GetUnknownRank() {
		return nil, false
	}
	dims := make([]int64, len(sp.GetDim()))
	for i, d := range sp.GetDim() {
		dims[i] = d.GetSize()
	}
	return dims, true
}

// variableBytes returns the size of the buffer a variable op owns (VarHandleOp, VariableV2,
// Variable: attrs "dtype" and "shape"), and false when it is not known.
func variableBytes(n *graphdef.Node) (int64, bool) {
	dt, ok := attrType(n, "dtype")
	if !ok {
		return 0, false
	}
	elem, ok := graphdef.ElementBytes(dt)
	if !ok {
		return 0, false
	}
	sh, ok := attrShape(n, "shape")
	if !ok {
		return 0, false
	}
	e := Elements(sh)
	if e < 0 {
		return 0, false
	}
	return e * elem, true
}
