package cost

// AliasedInput returns which data input the output port of an op of type op shares its buffer
// with in the simulator (Identity, Reshape, Squeeze, ...), or -1 when the output has its own
// buffer. Planners use it to see which tensors keep a swapped tensor's buffer alive.
func AliasedInput(op string, port int) int { return aliasInput(op, port) }
