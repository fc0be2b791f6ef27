package graphdef

import (
	"fmt"
	"math/bits"
	"strconv"

	apb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
)

// MaxTensorBytes is the largest tensor tfswap accepts: 2^50 bytes (1 PiB), far beyond any
// device's memory. A tensor's size is its element size times the product of its dimensions,
// and the simulator and planners add and multiply such sizes (peaks are sums of live
// tensors, transfers sums of copies); bounding every tensor, and every graph's tensors
// together (MaxGraphBytes), keeps all that arithmetic exact in int64. Shapes over the bound
// are refused with the tensor named, never wrapped around into a small or negative size.
const MaxTensorBytes int64 = 1 << 50

// MaxGraphBytes is the most all tensors of one graph may hold together: 2^56 bytes (64 PiB).
// It leaves a factor of 128 below int64's limit for sums that count a tensor more than once
// (a swapped tensor's copies on the device and the host).
const MaxGraphBytes int64 = 1 << 56

// MulBytes returns a*b for sizes and counts (a, b >= 0), and false when the product would
// exceed limit (the product is then not computed, so nothing wraps around).
func MulBytes(a, b, limit int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > uint64(limit) {
		return 0, false
	}
	return int64(lo), true
}

// AddBytes returns a+b for sizes (a, b >= 0), and false when the sum would exceed limit.
func AddBytes(a, b, limit int64) (int64, bool) {
	if a < 0 || b < 0 || a > limit-b {
		return 0, false
	}
	return a + b, true
}

// SizeBound returns an upper bound of the bytes a tensor of element size elem and shape
// shape holds: elem times the product of its dimensions, counting unknown (negative) and zero
// dimensions as 1, so that every partial product of its dimensions is below it too. ok is
// false when the bound exceeds MaxTensorBytes.
func SizeBound(elem int64, shape []int64) (int64, bool) {
	n := max(elem, 1)
	for _, d := range shape {
		var ok bool
		if n, ok = MulBytes(n, max(d, 1), MaxTensorBytes); !ok {
			return 0, false
		}
	}
	return n, true
}

// checkTensorSize fails when the tensor (name, port) of dtype dt (elem 1 when its element
// size is not fixed or known) and shape shape may be larger than MaxTensorBytes.
func checkTensorSize(name string, port int, dt DataType, known bool, shape []int64) error {
	elem := int64(1)
	if known {
		if e, ok := ElementBytes(dt); ok {
			elem = e
		}
	}
	if _, ok := SizeBound(elem, shape); ok {
		return nil
	}
	what := "tensor " + name + ":" + strconv.Itoa(port)
	if port < 0 {
		what = "the shape attr of " + name
	}
	tn := ""
	if known {
		tn = " " + DataTypeName(dt)
	}
	return fmt.Errorf("%s has shape %s%s, more than 1 PiB (2^50 bytes), the largest tensor tfswap accepts", what, FormatShape(shape), tn)
}

// TotalBytes returns the bytes g's tensors hold together, bounded as SizeBound bounds each
// (unknown dimensions counted as 1; tensors of unknown rank or without a fixed element size
// not counted), and variables' buffers by their shape attrs. It fails, naming the tensor at
// which the sum passed it, when the total exceeds MaxGraphBytes.
func (g *Graph) TotalBytes() (int64, error) {
	var total int64
	add := func(what string, b int64) error {
		var ok bool
		if total, ok = AddBytes(total, b, MaxGraphBytes); !ok {
			return errorf(g.Source, "", "the graph's tensors hold more than 64 PiB (2^56 bytes) together, the most tfswap accepts (passed at %s)", what)
		}
		return nil
	}
	for _, n := range g.Nodes {
		for port, sh := range n.OutputShapes {
			if sh == nil || port >= len(n.OutputTypes) {
				continue
			}
			elem, ok := ElementBytes(n.OutputTypes[port])
			if !ok {
				continue
			}
			b, _ := SizeBound(elem, sh) // within MaxTensorBytes: NewGraph checked it
			if err := add("tensor "+Tensor{Node: n, Port: port}.String(), b); err != nil {
				return 0, err
			}
		}
		if dt, sh, ok := variableShape(n); ok {
			if elem, ok := ElementBytes(dt); ok {
				b, _ := SizeBound(elem, sh)
				if err := add("variable "+n.Name, b); err != nil {
					return 0, err
				}
			}
		}
	}
	return total, nil
}

// shapeAttr returns the "dtype" and "shape" attrs of a node that has both (variables,
// placeholders), with unknown dimensions as -1; ok is false otherwise or for an unknown rank.
func shapeAttr(attrs map[string]*apb.AttrValue) (dt DataType, shape []int64, ok bool) {
	t, isType := attrs["dtype"].GetValue().(*apb.AttrValue_Type)
	sp := attrs["shape"].GetShape()
	if !isType || sp == nil || sp.GetUnknownRank() {
		return 0, nil, false
	}
	shape = make([]int64, len(sp.GetDim()))
	for i, d := range sp.GetDim() {
		shape[i] = d.GetSize()
	}
	return t.Type, shape, true
}

// variableShape is shapeAttr for the ops that own a variable's buffer.
func variableShape(n *Node) (DataType, []int64, bool) {
	switch n.Op {
	case "VarHandleOp", "VariableV2", "Variable":
		return shapeAttr(n.Def.GetAttr())
	}
	return 0, nil, false
}

// checkSizes fails when an output shape or the shape attr of n may describe a tensor larger
// than MaxTensorBytes.
func checkSizes(n *Node) error {
	for port, sh := range n.OutputShapes {
		if sh == nil {
			continue
		}
		var dt DataType
		known := port < len(n.OutputTypes)
		if known {
			dt = n.OutputTypes[port]
		}
		if err := checkTensorSize(n.Name, port, dt, known, sh); err != nil {
			return err
		}
	}
	if dt, sh, ok := shapeAttr(n.Def.GetAttr()); ok {
		if err := checkTensorSize(n.Name, -1, dt, true, sh); err != nil {
			return err
		}
	}
	return nil
}
