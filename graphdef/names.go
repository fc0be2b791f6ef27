package graphdef

// ValidNodeName reports whether TensorFlow accepts name as a node name. It is the rule of
// IsValidNodeName in TensorFlow's tensorflow/core/framework/node_def_util.cc, which graph
// import applies to every node (ValidateExternalNodeDefSyntax): one or more parts joined by
// '>', each part a letter, digit or '.' followed by any number of letters, digits and
// '-', '.', '/', '_'; that is, [A-Za-z0-9.][A-Za-z0-9_./-]*(>[A-Za-z0-9.][A-Za-z0-9_./-]*)*.
// Spaces, newlines, ':' and '^' are never allowed.
func ValidNodeName(name string) bool {
	start := true // the next byte starts a part
	for i := 0; i < len(name); i++ {
		c := name[i]
		letterDigitDot := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.'
		switch {
		case start:
			if !letterDigitDot {
				return false
			}
			start = false
		case c == '>':
			start = true
		case letterDigitDot || c == '-' || c == '/' || c == '_':
		default:
			return false
		}
	}
	return len(name) > 0 && !start
}
