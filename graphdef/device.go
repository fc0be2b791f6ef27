package graphdef

import (
	"fmt"
	"strconv"
	"strings"
)

// Device is a parsed TensorFlow device name such as
// "/job:worker/replica:0/task:1/device:GPU:0". Fields that the name does not set are empty
// (Job, Type) or -1 (Replica, Task, Index).
type Device struct {
	Job     string
	Replica int
	Task    int
	Type    string // "CPU", "GPU", "TPU", ... upper-cased as TensorFlow canonicalises it
	Index   int
}

// ParseDevice parses a device name in TensorFlow's full ("/job:x/replica:0/task:0/device:GPU:0")
// or legacy ("/gpu:0", "/cpu:0", "/job:x/gpu:1") form. The empty string parses to the zero
// specification (every field unset).
func ParseDevice(s string) (Device, error) {
	d := Device{Replica: -1, Task: -1, Index: -1}
	if s == "" {
		return d, nil
	}
	if !strings.HasPrefix(s, "/") {
		return d, fmt.Errorf("device %q: a device name starts with '/'", s)
	}
	for _, part := range strings.Split(s[1:], "/") {
		key, val, ok := strings.Cut(part, ":")
		if !ok {
			return d, fmt.Errorf("device %q: component %q has no ':'", s, part)
		}
		switch strings.ToLower(key) {
		case "job":
			d.Job = val
		case "replica":
			n, err := parseIndex(val)
			if err != nil {
				return d, fmt.Errorf("device %q: replica %q: %v", s, val, err)
			}
			d.Replica = n
		case "task":
			n, err := parseIndex(val)
			if err != nil {
				return d, fmt.Errorf("device %q: task %q: %v", s, val, err)
			}
			d.Task = n
		case "device":
			typ, idx, ok := strings.Cut(val, ":")
			d.Type = strings.ToUpper(typ)
			if ok {
				n, err := parseIndex(idx)
				if err != nil {
					return d, fmt.Errorf("device %q: device index %q: %v", s, idx, err)
				}
				d.Index = n
			}
		case "cpu", "gpu", "tpu":
			d.Type = strings.ToUpper(key)
			n, err := parseIndex(val)
			if err != nil {
				return d, fmt.Errorf("device %q: device index %q: %v", s, val, err)
			}
			d.Index = n
		default:
			return d, fmt.Errorf("device %q: unknown component %q", s, key)
		}
	}
	return d, nil
}

func parseIndex(s string) (int, error) {
	if s == "*" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a non-negative integer")
	}
	return n, nil
}

// IsZero reports whether the device specification sets nothing.
func (d Device) IsZero() bool {
	return d.Job == "" && d.Replica < 0 && d.Task < 0 && d.Type == "" && d.Index < 0
}

// String formats the device in TensorFlow's full form, leaving out unset fields.
func (d Device) String() string {
	var b strings.Builder
	if d.Job != "" {
		b.WriteString("/job:" + d.Job)
	}
	if d.Replica >= 0 {
		b.WriteString("/replica:" + strconv.Itoa(d.Replica))
	}
	if d.Task >= 0 {
		b.WriteString("/task:" + strconv.Itoa(d.Task))
	}
	if d.Type != "" {
		b.WriteString("/device:" + d.Type)
		if d.Index >= 0 {
			b.WriteString(":" + strconv.Itoa(d.Index))
		} else {
			b.WriteString(":*")
		}
	}
	return b.String()
}

// SameTask reports whether d and o name the same job, replica and task, treating unset
// fields as equal only to unset fields.
func (d Device) SameTask(o Device) bool {
	return d.Job == o.Job && d.Replica == o.Replica && d.Task == o.Task
}

// WithDevice returns d with its device type and index replaced, keeping job, replica and task.
func (d Device) WithDevice(typ string, index int) Device {
	d.Type = strings.ToUpper(typ)
	d.Index = index
	return d
}

// Matches reports whether device d (a node's placement, possibly partial) is the device
// named by spec, comparing only the fields both set. An unset device type or index in d is
// taken to match.
func (d Device) Matches(spec Device) bool {
	if spec.Job != "" && d.Job != "" && spec.Job != d.Job {
		return false
	}
	if spec.Replica >= 0 && d.Replica >= 0 && spec.Replica != d.Replica {
		return false
	}
	if spec.Task >= 0 && d.Task >= 0 && spec.Task != d.Task {
		return false
	}
	if spec.Type != "" && d.Type != "" && spec.Type != d.Type {
		return false
	}
	if spec.Index >= 0 && d.Index >= 0 && spec.Index != d.Index {
		return false
	}
	return true
}
