//go:build tensorflow

package main

import "github.com/tfswap/tfswap/tfrun"

func init() { visibleGPUs = tfrun.VisibleGPUs }
