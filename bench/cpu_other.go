//go:build !unix

package main

import "time"

// processCPU returns -1: this system's process CPU time is not read here.
func processCPU() time.Duration { return -1 }
